//! A fair lock's queue as the keyspace has it: who is first in line, and which locks a queue
//! key belongs to (what a change to it may free).

use crate::blocking::waiter::LockId;
use crate::core::Store;
use crate::effects::RedisStore;
use crate::ffi::{Args, Ctx};

const QUEUE_PREFIX: &[u8] = b"redisson_lock_queue:";

/// The owner first in line in the fair lock's queue, as the keyspace has it now.
pub fn first_in_line(ctx: &Ctx, id: &LockId) -> Option<Vec<u8>> {
    let args = Args::empty();
    let mut store = RedisStore::at(ctx, &args, Ctx::now_ms());
    store.list_index(&crate::core::names::fair_queue(&id.1), 0).ok().flatten()
}

/// The fair locks whose queue `key` may be: `redisson_lock_queue:{name}` belongs to `name`
/// and, as Redisson writes it for a name that has braces already, to `{name}`.
pub fn locks_of_queue(key: &[u8]) -> [Option<Vec<u8>>; 2] {
    let Some(rest) = key.strip_prefix(QUEUE_PREFIX) else { return [None, None] };
    let tagged = rest.contains(&b'{').then(|| rest.to_vec());
    let inner =
        rest.strip_prefix(b"{").and_then(|r| r.strip_suffix(b"}")).filter(|n| !n.contains(&b'{')).map(<[u8]>::to_vec);
    [tagged, inner]
}

#[cfg(test)]
mod tests {
    use super::locks_of_queue;

    #[test]
    fn a_queue_key_names_its_locks() {
        let of = |k: &str| {
            locks_of_queue(k.as_bytes())
                .into_iter()
                .flatten()
                .map(|v| String::from_utf8(v).unwrap_or_default())
                .collect::<Vec<_>>()
        };
        assert_eq!(of("redisson_lock_queue:{doc}"), ["{doc}", "doc"]);
        assert_eq!(of("redisson_lock_queue:a{b}c"), ["a{b}c"]);
        assert_eq!(of("redisson_lock_timeout:{doc}"), Vec::<String>::new());
    }
}
