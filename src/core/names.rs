//! Redisson's key and channel naming rules: the only place that formats a derived name.
//!
//! Redisson puts every derived key and channel in the lock key's Redis Cluster hash slot by
//! wrapping the lock name in braces, unless the name already carries a hash tag (any `{`), in
//! which case the name is used as it is and its own tag decides the slot.

/// The read-write lock's hash field that holds the mode; an owner may not be called that.
pub const MODE: &[u8] = b"mode";
/// The values of [`MODE`].
pub const READ: &[u8] = b"read";
pub const WRITE: &[u8] = b"write";

/// `prefix:{name}`, or `prefix:name` when `name` already contains `{`.
pub fn prefix(prefix: &str, name: &[u8]) -> Vec<u8> {
    let tagged = name.contains(&b'{');
    let mut out = Vec::with_capacity(prefix.len() + name.len() + 3);
    out.extend_from_slice(prefix.as_bytes());
    out.push(b':');
    if tagged {
        out.extend_from_slice(name);
    } else {
        out.push(b'{');
        out.extend_from_slice(name);
        out.push(b'}');
    }
    out
}

/// `{name}:suffix`, or `name:suffix` when `name` already contains `{`.
pub fn suffix(name: &[u8], suffix: &[u8]) -> Vec<u8> {
    let tagged = name.contains(&b'{');
    let mut out = Vec::with_capacity(name.len() + suffix.len() + 3);
    if tagged {
        out.extend_from_slice(name);
    } else {
        out.push(b'{');
        out.extend_from_slice(name);
        out.push(b'}');
    }
    out.push(b':');
    out.extend_from_slice(suffix);
    out
}

/// The reentrant (and fenced) lock's unlock channel.
pub fn lock_channel(key: &[u8]) -> Vec<u8> {
    prefix("redisson_lock__channel", key)
}

/// The read-write lock's unlock channel.
pub fn rwlock_channel(key: &[u8]) -> Vec<u8> {
    prefix("redisson_rwlock", key)
}

/// A fair-lock waiter's own channel: the lock channel, `:`, the owner.
pub fn fair_waiter_channel(key: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut c = lock_channel(key);
    c.push(b':');
    c.extend_from_slice(owner);
    c
}

/// The fair lock's FIFO list of waiting owners.
pub fn fair_queue(key: &[u8]) -> Vec<u8> {
    prefix("redisson_lock_queue", key)
}

/// Up to this many bytes, [`fair_queue_buf`] builds the name on the stack.
const SHORT: usize = 128;

/// A derived name, on the stack when short.
pub enum NameBuf {
    Short([u8; SHORT], usize),
    Long(Vec<u8>),
}

impl std::ops::Deref for NameBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            NameBuf::Short(buf, len) => &buf[..*len],
            NameBuf::Long(v) => v,
        }
    }
}

/// [`fair_queue`] without a heap allocation for a name of usual length: every acquire of a
/// free lock looks the queue up, and an allocation would cost as much as the lookup.
#[inline]
pub fn fair_queue_buf(key: &[u8]) -> NameBuf {
    const PREFIX: &[u8] = b"redisson_lock_queue:";
    let tagged = key.contains(&b'{');
    let len = PREFIX.len() + key.len() + if tagged { 0 } else { 2 };
    if len > SHORT {
        return NameBuf::Long(fair_queue(key));
    }
    // Built in place (inlined into the caller), with one copy of the variable part.
    let mut buf = [0u8; SHORT];
    buf[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut at = PREFIX.len();
    if !tagged {
        buf[at] = b'{';
        at += 1;
    }
    buf[at..at + key.len()].copy_from_slice(key);
    at += key.len();
    if !tagged {
        buf[at] = b'}';
        at += 1;
    }
    NameBuf::Short(buf, at)
}

/// The concatenation of `parts`, on the stack when short (a synchronizer's channel, built for
/// every publish).
#[inline]
pub fn concat_buf(parts: &[&[u8]]) -> NameBuf {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len > SHORT {
        return NameBuf::Long(parts.concat());
    }
    let mut buf = [0u8; SHORT];
    let mut at = 0;
    for p in parts {
        buf[at..at + p.len()].copy_from_slice(p);
        at += p.len();
    }
    NameBuf::Short(buf, at)
}

/// The fair lock's zset of waiter deadlines.
pub fn fair_timeouts(key: &[u8]) -> Vec<u8> {
    prefix("redisson_lock_timeout", key)
}

/// The fenced lock's token counter.
pub fn token(key: &[u8]) -> Vec<u8> {
    prefix("redisson_lock_token", key)
}

/// What every token counter's name starts with (any lock name, any kind).
pub const TOKEN_PREFIX: &[u8] = b"redisson_lock_token:";

/// Whether `key` is named as a token counter is.
#[inline]
pub fn is_token(key: &[u8]) -> bool {
    key.len() > TOKEN_PREFIX.len() && key.starts_with(TOKEN_PREFIX)
}

/// What the era key's name starts with (see the lock family's `era.rs`).
pub const ERA_KEY: &[u8] = b"lockmod:fencing:era";

/// The key that records the fencing era in force (the lock family's `era.rs`): `lockmod:fencing:era`, or
/// in a cluster `lockmod:fencing:era:{<tag>}` with the tag of `slot` (`super::slots::tag`), so
/// that the record lives in the slot of the counter whose write needs it.
pub fn era_key(slot: Option<u16>) -> Vec<u8> {
    let mut k = ERA_KEY.to_vec();
    if let Some(slot) = slot {
        k.extend_from_slice(format!(":{{{}}}", super::slots::tag(slot)).as_bytes());
    }
    k
}

/// The unlock latch of one unlock request, which makes a retried unlock idempotent.
pub fn unlock_latch(key: &[u8], request_id: &[u8]) -> Vec<u8> {
    let mut k = prefix("redisson_unlock_latch", key);
    k.push(b':');
    k.extend_from_slice(request_id);
    k
}

/// The prefix of an owner's read-hold timeout keys: `suffix(key, owner) + ":rwlock_timeout"`.
pub fn read_timeout_prefix(key: &[u8], owner: &[u8]) -> Vec<u8> {
    let mut k = suffix(key, owner);
    k.extend_from_slice(b":rwlock_timeout");
    k
}

/// The timeout key of an owner's `i`-th read hold.
pub fn read_timeout(key: &[u8], owner: &[u8], i: i64) -> Vec<u8> {
    // One allocation: a read acquire builds this name on its hot path.
    let mut k = Vec::with_capacity(key.len() + owner.len() + 40);
    if key.contains(&b'{') {
        k.extend_from_slice(key);
    } else {
        k.push(b'{');
        k.extend_from_slice(key);
        k.push(b'}');
    }
    k.push(b':');
    k.extend_from_slice(owner);
    k.extend_from_slice(b":rwlock_timeout:");
    let mut digits = [0u8; 20];
    let mut n = i.unsigned_abs();
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        k.push(b'-');
    }
    k.extend_from_slice(&digits[at..]);
    k
}

/// The write-hold field of an owner in the read-write lock hash.
pub fn write_field(owner: &[u8]) -> Vec<u8> {
    let mut f = owner.to_vec();
    f.extend_from_slice(b":write");
    f
}

/// `{name}`, or the name itself when it contains `{`: the prefix Redisson's read-lock scripts
/// build every holder's timeout keys under (`key_prefix:owner:rwlock_timeout:i`).
pub fn key_prefix(name: &[u8]) -> Vec<u8> {
    let mut k = suffix(name, b"");
    k.pop();
    k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::slots::key_slot;

    #[test]
    fn key_slots_are_redis_clusters() {
        // Values from `CLUSTER KEYSLOT` (Redis' own test suite and a server).
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{}foo"), key_slot(b"{}foo"));
        assert_ne!(key_slot(b"{}foo"), key_slot(b"foo"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"foo{bar}{zap}"), key_slot(b"bar"));
        // A name with a proper tag keeps its derived names in its slot; broken tags do not.
        for name in [&b"lock"[..], b"a{b}c"] {
            assert_eq!(key_slot(&suffix(name, b"value")), key_slot(name));
            assert_eq!(key_slot(&prefix("redisson_lock__channel", name)), key_slot(name));
        }
        for name in [&b"a{}b"[..], b"{}", b"x{y", b"a}b"] {
            assert_ne!(key_slot(&suffix(name, b"value")), key_slot(name), "{}", String::from_utf8_lossy(name));
        }
    }

    #[rustfmt::skip]
    const CASES: &[(&str, &str, &str)] = &[
        // name,        prefix("p", name),  suffix(name, "s")
        ("lock",        "p:{lock}",         "{lock}:s"),
        ("{lock}",      "p:{lock}",         "{lock}:s"),
        ("a{b}c",       "p:a{b}c",          "a{b}c:s"),
        ("half{open",   "p:half{open",      "half{open:s"),
        ("",            "p:{}",             "{}:s"),
    ];

    #[test]
    fn prefix_and_suffix_follow_redissons_brace_rules() {
        for (name, p, s) in CASES {
            assert_eq!(prefix("p", name.as_bytes()), p.as_bytes(), "prefix of {name}");
            assert_eq!(suffix(name.as_bytes(), b"s"), s.as_bytes(), "suffix of {name}");
        }
    }

    #[test]
    fn the_fair_queue_name_on_the_stack_is_the_same_name() {
        let long = "n".repeat(200);
        for name in CASES.iter().map(|c| c.0).chain([long.as_str(), &long[..106], &long[..107]]) {
            assert_eq!(&*fair_queue_buf(name.as_bytes()), fair_queue(name.as_bytes()).as_slice(), "{name}");
        }
    }

    #[test]
    fn derived_names_match_redisson() {
        assert_eq!(lock_channel(b"l"), b"redisson_lock__channel:{l}");
        assert_eq!(rwlock_channel(b"l"), b"redisson_rwlock:{l}");
        assert_eq!(fair_waiter_channel(b"l", b"o:1"), b"redisson_lock__channel:{l}:o:1");
        assert_eq!(fair_queue(b"l"), b"redisson_lock_queue:{l}");
        assert_eq!(fair_timeouts(b"l"), b"redisson_lock_timeout:{l}");
        assert_eq!(token(b"l"), b"redisson_lock_token:{l}");
        assert_eq!(unlock_latch(b"l", b"r1"), b"redisson_unlock_latch:{l}:r1");
        assert_eq!(read_timeout(b"l", b"o:1", 3), b"{l}:o:1:rwlock_timeout:3");
        assert_eq!(read_timeout(b"{l}", b"o", 1), b"{l}:o:rwlock_timeout:1");
        assert_eq!(write_field(b"o:1"), b"o:1:write");
        assert_eq!(key_prefix(b"l"), b"{l}");
        assert_eq!(key_prefix(b"a{b}c"), b"a{b}c");
    }
}
