//! Redis Cluster's hash slots: the slot of a key ([`key_slot`], for the `CROSSSLOT` check of
//! every command's derived keys), and a hash tag per slot for the one key the module names
//! itself, the fencing era's record (`names::era_key`). In a cluster a key must live in a slot
//! of the node that writes it, so the record goes into the slot of the counter whose write
//! needs it, under a hash tag chosen for that slot ([`tag`]); a node looks for its records
//! under each slot's tag.

use std::sync::OnceLock;

/// Slots in a Redis Cluster.
pub const SLOTS: usize = 16_384;

/// CRC16-CCITT (XMODEM), the checksum Redis hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(bytes)
}

/// The slot of `key`, as `CLUSTER KEYSLOT` (cluster.c's `keyHashSlot`) computes it: CRC16 of
/// the bytes between the first `{` and the first `}` after it when there are any, else of the
/// key. So `{name}:x` and `p:{name}` share `name`'s slot, but not when `name` holds an empty or
/// unclosed tag (`a{}b`, `x{y`) or a `}` alone (`a}b`): there Redisson's own scripts get
/// `CROSSSLOT`, and so do the module's commands.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = key
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
        })
        .unwrap_or(key);
    crc16(hashed) % SLOTS as u16
}

/// A hash tag for `slot`: the smallest decimal number that hashes there (`{tag}` puts a key in
/// the slot). Computed once for every slot (about 150,000 checksums of a few bytes).
pub fn tag(slot: u16) -> u32 {
    static TAGS: OnceLock<Vec<u32>> = OnceLock::new();
    let tags = TAGS.get_or_init(|| {
        let mut tags = vec![u32::MAX; SLOTS];
        let mut left = SLOTS;
        let mut n: u32 = 0;
        let mut buf = crate::core::IntBuf::default();
        while left > 0 {
            let s = usize::from(crc16(buf.format(i64::from(n))) % SLOTS as u16);
            if tags[s] == u32::MAX {
                tags[s] = n;
                left -= 1;
            }
            n += 1;
        }
        tags
    });
    tags[usize::from(slot) % SLOTS]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Redis' own test vectors (cluster spec), and hash tags.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"123456789"), 12_739);
        assert_eq!(key_slot(b"foo"), 12_182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"), "an empty tag hashes the whole key");
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        assert_eq!(key_slot(b"redisson_lock_token:{k}"), key_slot(b"k"));
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_there() {
        for slot in 0..SLOTS as u16 {
            let key = format!("lockmod:fencing:era:{{{}}}", tag(slot));
            assert_eq!(key_slot(key.as_bytes()), slot);
        }
    }
}
