//! Redisson's names for the synchronizers' derived keys and channels: the semaphores' channel,
//! the expirable semaphore's lease zset and the count-down latch's channel.
//!
//! The semaphores follow the locks' brace rules (`crate::core::names::prefix` and `suffix`, one
//! implementation of them): a name that already carries a `{` keeps its own hash tag. The
//! latch does not: Redisson builds its channel by plain concatenation, always braced, so a
//! name like `a{b}` gets `redisson_countdownlatch__channel__{a{b}}`. That channel is only ever
//! published to, and a plain `PUBLISH` has no slot; Redis Cluster with sharded pub/sub
//! (`SPUBLISH`) would hash it by its first tag (`a{b`), which is not the key's slot.

use crate::core::names::{self, concat_buf, NameBuf};

/// `redisson_sc:{name}`: where both semaphores publish the permits a change made available.
pub fn semaphore_channel(name: &[u8]) -> Vec<u8> {
    names::prefix("redisson_sc", name)
}

/// [`semaphore_channel`] on the stack when short: every change that adds permits publishes.
pub fn semaphore_channel_buf(name: &[u8]) -> NameBuf {
    if name.contains(&b'{') {
        concat_buf(&[b"redisson_sc:", name])
    } else {
        concat_buf(&[b"redisson_sc:{", name, b"}"])
    }
}

/// `{name}:timeout`: the expirable semaphore's zset of leased permit ids -> absolute expiry
/// (ms), Redisson's `suffixName(name, "timeout")`.
pub fn permit_timeouts(name: &[u8]) -> Vec<u8> {
    names::suffix(name, b"timeout")
}

/// `{name}:value`, and with a client id `{name}:value:<id>`: a rate limiter's permits available
/// now (Redisson's `getValueName()`, `getClientValueName()`: the id is joined by `:` alone,
/// since the value name already carries a `{`).
pub fn limiter_value(name: &[u8], client: Option<&[u8]>) -> Vec<u8> {
    with_client(names::suffix(name, b"value"), client)
}

/// `{name}:permits`, and with a client id `{name}:permits:<id>`: a rate limiter's grants.
pub fn limiter_permits(name: &[u8], client: Option<&[u8]>) -> Vec<u8> {
    with_client(names::suffix(name, b"permits"), client)
}

fn with_client(mut key: Vec<u8>, client: Option<&[u8]>) -> Vec<u8> {
    if let Some(id) = client {
        key.push(b':');
        key.extend_from_slice(id);
    }
    key
}

/// The names whose expirable semaphore keeps its leases in `zset`: the inverse of
/// [`permit_timeouts`]. `{x}:timeout` is the zset of `x` and of `{x}` alike (Redisson names
/// both so), `a{b}:timeout` that of `a{b}` only, and a name that ends otherwise, or is
/// unbraced without a `{`, is nobody's.
pub fn names_of_permit_timeouts(zset: &[u8]) -> Vec<Vec<u8>> {
    let Some(base) = zset.strip_suffix(b":timeout") else { return Vec::new() };
    let mut names = Vec::new();
    if let Some(inner) = base.strip_prefix(b"{").and_then(|b| b.strip_suffix(b"}")) {
        if !inner.contains(&b'{') {
            names.push(inner.to_vec());
        }
    }
    if base.contains(&b'{') {
        names.push(base.to_vec());
    }
    names
}

/// `redisson_countdownlatch__channel__{name}`: the latch's channel, braced whatever the name.
pub fn latch_channel(name: &[u8]) -> Vec<u8> {
    latch_channel_buf(name).to_vec()
}

/// [`latch_channel`] on the stack when short.
pub fn latch_channel_buf(name: &[u8]) -> NameBuf {
    concat_buf(&[b"redisson_countdownlatch__channel__{", name, b"}"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const CASES: &[(&str, &str, &str, &str)] = &[
        // name,     semaphore channel,    permit timeouts,     latch channel
        ("s",        "redisson_sc:{s}",    "{s}:timeout",       "redisson_countdownlatch__channel__{s}"),
        ("{s}",      "redisson_sc:{s}",    "{s}:timeout",       "redisson_countdownlatch__channel__{{s}}"),
        ("a{b}c",    "redisson_sc:a{b}c",  "a{b}c:timeout",     "redisson_countdownlatch__channel__{a{b}c}"),
        ("",         "redisson_sc:{}",     "{}:timeout",        "redisson_countdownlatch__channel__{}"),
        // Past the stack buffer: built on the heap, the same bytes.
        ("a-name-long-enough-to-spill-the-stack-buffer-of-one-hundred-and-twenty-eight-bytes-0123456789-0123456789-0123456789",
                     "redisson_sc:{a-name-long-enough-to-spill-the-stack-buffer-of-one-hundred-and-twenty-eight-bytes-0123456789-0123456789-0123456789}",
                                           "{a-name-long-enough-to-spill-the-stack-buffer-of-one-hundred-and-twenty-eight-bytes-0123456789-0123456789-0123456789}:timeout",
                                                                "redisson_countdownlatch__channel__{a-name-long-enough-to-spill-the-stack-buffer-of-one-hundred-and-twenty-eight-bytes-0123456789-0123456789-0123456789}"),
    ];

    #[rustfmt::skip]
    const OWNERS: &[(&str, &[&str])] = &[
        // zset,                 the names whose leases it holds
        ("{s}:timeout",          &["s", "{s}"]),
        ("a{b}c:timeout",        &["a{b}c"]),
        ("{}:timeout",           &["", "{}"]),
        ("{a}b}:timeout",        &["a}b", "{a}b}"]),
        ("{{s}}:timeout",        &["{{s}}"]),
        ("s:timeout",            &[]),
        ("{s}:timeouts",         &[]),
        (":timeout",             &[]),
    ];

    #[test]
    fn a_lease_zset_names_the_semaphores_whose_it_may_be() {
        for (zset, names) in OWNERS {
            let got = names_of_permit_timeouts(zset.as_bytes());
            let want: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
            assert_eq!(got, want, "{zset}");
            for n in &got {
                assert_eq!(permit_timeouts(n), zset.as_bytes(), "{zset}: the inverse of permit_timeouts");
            }
        }
    }

    #[test]
    fn rate_limiter_names_follow_redissons_rules() {
        assert_eq!(limiter_value(b"r", None), b"{r}:value");
        assert_eq!(limiter_value(b"r", Some(b"id-1")), b"{r}:value:id-1");
        assert_eq!(limiter_permits(b"r", None), b"{r}:permits");
        assert_eq!(limiter_permits(b"a{b}c", Some(b"x")), b"a{b}c:permits:x");
        assert_eq!(limiter_value(b"{r}", None), b"{r}:value");
    }

    #[test]
    fn synchronizer_names_follow_redissons_rules() {
        for (name, channel, timeouts, latch) in CASES {
            let n = name.as_bytes();
            assert_eq!(semaphore_channel(n), channel.as_bytes(), "channel of {name:?}");
            assert_eq!(permit_timeouts(n), timeouts.as_bytes(), "timeouts of {name:?}");
            assert_eq!(latch_channel(n), latch.as_bytes(), "latch channel of {name:?}");
            assert_eq!(&*semaphore_channel_buf(n), channel.as_bytes(), "channel buffer of {name:?}");
            assert_eq!(&*latch_channel_buf(n), latch.as_bytes(), "latch channel buffer of {name:?}");
        }
    }
}
