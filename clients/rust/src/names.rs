//! Redisson's naming rules for the keys a lock derives from its name (the module applies the
//! same rules, `src/core/names.rs`): a derived key wraps the lock name in braces so that it
//! lands in the lock key's Redis Cluster slot, unless the name already has a `{`.

/// `p:{name}`, or `p:name` when `name` already contains `{`.
pub(crate) fn prefix(p: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{p}:{name}")
    } else {
        format!("{p}:{{{name}}}")
    }
}

/// The fencing-token counter of lock `name` (one per name, whatever the kind).
pub(crate) fn token_key(name: &str) -> String {
    prefix("redisson_lock_token", name)
}

/// The latch an unlock with `LATCH <request id>` writes: `redisson_unlock_latch:{name}:<id>`.
pub(crate) fn unlock_latch_key(name: &str, request_id: &str) -> String {
    format!("{}:{request_id}", prefix("redisson_unlock_latch", name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_is_braced_and_a_tagged_one_kept() {
        assert_eq!(token_key("orders"), "redisson_lock_token:{orders}");
        assert_eq!(token_key("{shop}:orders"), "redisson_lock_token:{shop}:orders");
        assert_eq!(unlock_latch_key("l", "r1"), "redisson_unlock_latch:{l}:r1");
        assert_eq!(unlock_latch_key("{l}", "r1"), "redisson_unlock_latch:{l}:r1");
    }
}
