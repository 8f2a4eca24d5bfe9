//! Scripts not in the table that look like Redisson's lock or rate-limiter scripts, counted in
//! `INFO lockmod` so an operator sees a Redisson release whose scripts the module does not know.

use crate::core::names;

/// A Redisson lock name, `<uuid>:<thread id>` (the client's UUID), or its `:write` field.
fn is_lock_name(b: &[u8]) -> bool {
    let b = b.strip_suffix(b":write").unwrap_or(b);
    if b.len() < 38 || b[36] != b':' {
        return false;
    }
    let uuid = &b[..36];
    let hex_or_dash =
        uuid.iter().enumerate().all(
            |(i, &c)| {
                if [8, 13, 18, 23].contains(&i) {
                    c == b'-'
                } else {
                    c.is_ascii_hexdigit()
                }
            },
        );
    hex_or_dash && b[37..].iter().all(u8::is_ascii_digit)
}

/// True for a script call that is not in the table but looks like one of Redisson's lock
/// scripts: a later key is a name Redisson derives from `KEYS[1]` (a lock channel, a fair
/// queue or deadline set, a token counter, an unlock latch, a read-hold prefix), or one of the
/// first three arguments is a Redisson lock owner (`<uuid>:<thread id>[:write]`). Counted in
/// `INFO lockmod` so an operator sees the scripts of a Redisson release the table misses.
pub fn looks_like_redisson(keys: &[&[u8]], argv: &[&[u8]]) -> bool {
    if argv.iter().take(3).any(|a| is_lock_name(a)) {
        return true;
    }
    let Some(name) = keys.first() else { return false };
    let derived = [
        names::lock_channel(name),
        names::rwlock_channel(name),
        names::fair_queue(name),
        names::fair_timeouts(name),
        names::token(name),
        names::key_prefix(name),
        // A rate limiter's value and grants (`RRateLimiter`).
        names::suffix(name, b"value"),
        names::suffix(name, b"permits"),
    ];
    let latch = names::unlock_latch(name, b"");
    let holds = names::suffix(name, b"");
    keys[1..].iter().any(|k| {
        derived.iter().any(|d| d.as_slice() == *k)
            || k.starts_with(&latch)
            || (k.starts_with(&holds) && k.ends_with(b":rwlock_timeout"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWNER: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:57";

    fn k(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
        v.iter().map(|x| x.as_slice()).collect()
    }

    #[test]
    fn redisson_like_calls_are_told_from_other_scripts() {
        let yes = [
            (k(&["l"]), k(&["30000", OWNER])),
            (k(&["l"]), k(&["30000", &format!("{OWNER}:write")])),
            (k(&["l", "redisson_lock__channel:{l}"]), k(&["0"])),
            (k(&["a{b}", "redisson_lock_queue:a{b}", "x"]), k(&[])),
            (k(&["l", "redisson_unlock_latch:{l}:abc"]), k(&[])),
            (k(&["l", "{l}:someone:rwlock_timeout"]), k(&[])),
            (k(&["l", "{l}:value", "{l}:value:id", "{l}:permits", "{l}:permits:id"]), k(&["1"])),
        ];
        for (keys, argv) in &yes {
            assert!(looks_like_redisson(&refs(keys), &refs(argv)), "{keys:?} {argv:?}");
        }
        let no = [
            (k(&["user:1"]), k(&["30000", "someone"])),
            (k(&["l", "l2"]), k(&["x"])),
            (k(&[]), k(&["6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab"])),
            (k(&["l"]), k(&["a", "b", "c", OWNER])),
        ];
        for (keys, argv) in &no {
            assert!(!looks_like_redisson(&refs(keys), &refs(argv)), "{keys:?} {argv:?}");
        }
    }
}
