//! Redisson's key and channel names (DESIGN.md section 2), for the Lua side and the setup writes.

fn tagged(name: &str) -> bool {
    name.contains('{')
}

pub fn prefix(p: &str, name: &str) -> String {
    if tagged(name) {
        format!("{p}:{name}")
    } else {
        format!("{p}:{{{name}}}")
    }
}

pub fn suffix(name: &str, s: &str) -> String {
    if tagged(name) {
        format!("{name}:{s}")
    } else {
        format!("{{{name}}}:{s}")
    }
}

pub fn lock_channel(key: &str) -> String {
    prefix("redisson_lock__channel", key)
}

pub fn rwlock_channel(key: &str) -> String {
    prefix("redisson_rwlock", key)
}

pub fn fair_queue(key: &str) -> String {
    prefix("redisson_lock_queue", key)
}

pub fn fair_timeouts(key: &str) -> String {
    prefix("redisson_lock_timeout", key)
}

pub fn token(key: &str) -> String {
    prefix("redisson_lock_token", key)
}

/// The read-hold timeout prefix `T` of an owner; hold i lives at `T:i`.
pub fn read_timeout_prefix(key: &str, owner: &str) -> String {
    format!("{}:rwlock_timeout", suffix(key, owner))
}

/// The key prefix the read-unlock script scans under (`{key}`, or `key` when already tagged).
pub fn key_prefix(key: &str) -> String {
    if tagged(key) {
        key.to_string()
    } else {
        format!("{{{key}}}")
    }
}

pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
