//! Redisson's naming rules, written again for the tests (an independent check of src/names.rs)
//! and shared with the bench driver (`bench/src/main.rs` includes this file).

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

pub fn fair_waiter_channel(key: &str, owner: &str) -> String {
    format!("{}:{owner}", lock_channel(key))
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

pub fn latch(key: &str, request: &str) -> String {
    format!("{}:{request}", prefix("redisson_unlock_latch", key))
}

pub fn read_timeout_prefix(key: &str, owner: &str) -> String {
    format!("{}:rwlock_timeout", suffix(key, owner))
}

pub fn read_timeout(key: &str, owner: &str, i: i64) -> String {
    format!("{}:{i}", read_timeout_prefix(key, owner))
}

/// `{key}`, or the key itself when it has a hash tag: the prefix Redisson's read-unlock script
/// builds its timeout keys under.
pub fn key_prefix(key: &str) -> String {
    if tagged(key) {
        key.to_string()
    } else {
        format!("{{{key}}}")
    }
}
