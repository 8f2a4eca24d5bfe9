//! The commands a script runs inside Lua, each on the key or channel it touches: the filter
//! runs the native command only for a user ACL would let run every one of them (and the
//! `EVALSHA` and the native command themselves), so a restricted user gets what the script
//! gives it, `NOPERM` inside the Lua included, never a new error.
//!
//! Keys and channels a script only finds at run time (a read hold's number, the waiter at the
//! head of a fair queue) are represented by the first hold and the caller's own channel.

use super::rewrite::Env;
use super::sync::table::SyncKind;
use super::table::Kind;
use crate::core::names;

/// The key or channel an inner command is checked on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum On {
    /// `KEYS[i + 1]`.
    Key(usize),
    /// A name derived at run time.
    Own(Vec<u8>),
}

/// Every inner command name (lowercase), for the filter's static strings.
pub const COMMANDS: &[&str] = &[
    "exists",
    "hexists",
    "hincrby",
    "pexpire",
    "pttl",
    "incr",
    "del",
    "get",
    "set",
    "publish",
    "spublish",
    "hget",
    "hset",
    "hdel",
    "hlen",
    "hkeys",
    "lindex",
    "zscore",
    "zrem",
    "lpop",
    "zrange",
    "zincrby",
    "zadd",
    "rpush",
    "lrange",
    "lrem",
    "decr",
    "decrby",
    "incrby",
    "zrangebyscore",
    "zcount",
    "hsetnx",
    "zremrangebyscore",
    "zcard",
    "pexpireat",
    "persist",
    "gcra",
];

/// The (command, key or channel) pairs the script of `kind` may run, for a call [`plan`]
/// accepted (so `keys` and `argv` have the shape the kind expects).
///
/// [`plan`]: super::rewrite::plan
pub fn inner_commands(kind: Kind, keys: &[&[u8]], argv: &[&[u8]], env: Env) -> Vec<(&'static str, On)> {
    use On::Key;
    let publish = if env.sharded { "spublish" } else { "publish" };
    let on = |cmds: &[&'static str], target: On| -> Vec<(&'static str, On)> {
        cmds.iter().map(|c| (*c, target.clone())).collect()
    };
    let latch = |k: usize| on(&["get", "set"], Key(k));
    let hold1 = |prefix: &[u8]| {
        let mut t = prefix.to_vec();
        t.extend_from_slice(b":1");
        On::Own(t)
    };
    let arg = |i: usize| argv.get(i).copied().unwrap_or_default();
    let name = keys.first().copied().unwrap_or_default();
    let fair_purge = |v: &mut Vec<(&'static str, On)>| {
        v.extend(on(&["lindex", "lpop"], Key(1)));
        v.extend(on(&["zscore", "zrem"], Key(2)));
    };
    // The native acquire of a free name reads its fair queue (one name, one kind), which the
    // script never does: a user denied that read is left to the script, not refused.
    let fair_peek =
        || vec![("lindex", On::Own(names::fair_queue(name))), ("zscore", On::Own(names::fair_timeouts(name)))];
    let mut v = Vec::new();
    match kind {
        Kind::LockAcquire | Kind::LockAcquireFenced { .. } => {
            v = on(&["exists", "hexists", "hincrby", "pexpire", "pttl"], Key(0));
            if matches!(kind, Kind::LockAcquireFenced { .. }) {
                v.push(("incr", Key(1)));
            }
            v.extend(fair_peek());
        }
        Kind::LockUnlock { latch: l, .. } => {
            v = on(&["hexists", "hincrby", "pexpire", "del"], Key(0));
            v.push((publish, Key(1)));
            if l {
                v.extend(latch(2));
            }
        }
        Kind::LockRenew { .. } => v = on(&["hexists", "pexpire"], Key(0)),
        Kind::LockForceUnlock { .. } => v = vec![("del", Key(0)), (publish, Key(1))],
        Kind::RwRead => {
            v = on(&["hget", "hset", "hexists", "hincrby", "pexpire", "pttl"], Key(0));
            v.extend(on(&["set", "pexpire"], hold1(keys.get(1).copied().unwrap_or_default())));
            v.extend(fair_peek());
        }
        Kind::RwWrite => {
            v = on(&["hget", "hset", "hexists", "hincrby", "pexpire", "pttl"], Key(0));
            v.extend(fair_peek());
        }
        Kind::RwUnlockRead { latch: l, .. } => {
            v = on(&["hget", "hexists", "hincrby", "hdel", "hlen", "hkeys", "pexpire", "del"], Key(0));
            v.push((publish, Key(1)));
            v.extend(on(&["del", "pttl"], hold1(keys.get(2).copied().unwrap_or_default())));
            if l {
                v.extend(latch(4));
            }
        }
        Kind::RwUnlockWrite { latch: l, .. } => {
            v = on(&["hget", "hexists", "hincrby", "pexpire", "hdel", "hlen", "del", "hset"], Key(0));
            v.push((publish, Key(1)));
            if l {
                v.extend(latch(2));
            }
        }
        Kind::RwForceUnlock { .. } => {
            v = on(&["hget", "del"], Key(0));
            v.push((publish, Key(1)));
        }
        Kind::RwRenewAll { .. } | Kind::RwRenewOwner => {
            let owner = if kind == Kind::RwRenewOwner { arg(2) } else { arg(1) };
            v = on(&["hget", "pexpire", "hlen", "hkeys"], Key(0));
            v.push(("pexpire", hold1(&names::read_timeout_prefix(name, owner))));
        }
        Kind::FairAcquire(_) | Kind::FairTry { .. } => {
            fair_purge(&mut v);
            v.extend(on(&["exists", "hset", "hexists", "hincrby", "pexpire", "pttl"], Key(0)));
            v.extend(on(&["exists", "rpush"], Key(1)));
            v.extend(on(&["zrange", "zincrby", "zadd"], Key(2)));
        }
        Kind::FairUnlock { latch: l, .. } => {
            fair_purge(&mut v);
            v.extend(on(&["exists", "hexists", "hincrby", "pexpire", "del"], Key(0)));
            v.push((publish, On::Own(names::fair_waiter_channel(name, arg(2)))));
            if l {
                v.extend(latch(4));
            }
        }
        Kind::FairForceUnlock { .. } => {
            fair_purge(&mut v);
            v.push(("del", Key(0)));
            v.push((publish, On::Own(names::fair_waiter_channel(name, b""))));
        }
        Kind::FairCancel => {
            v = on(&["lrange", "lrem"], Key(0));
            v.extend(on(&["zincrby", "zrem"], Key(1)));
        }
        Kind::Sync(k) => v = sync_inner(k, publish),
        Kind::Rate(k) => v = k.inner_commands().into_iter().map(|(c, i)| (c, On::Key(i))).collect(),
        Kind::Lua(_) => {}
    }
    // A script that publishes with `redis.call('publish', ...)` checks PUBLISH whatever `env`.
    let fixed = kind.publishes_fixed();
    if fixed {
        for (c, _) in v.iter_mut() {
            if *c == "spublish" {
                *c = "publish";
            }
        }
    }
    v
}

/// The commands a synchronizer body runs: KEYS are `name` and its channel, plus the
/// expirable semaphore's zset `Z` (`name ch Z` or `name Z ch`, as Redisson orders them).
fn sync_inner(k: SyncKind, publish: &'static str) -> Vec<(&'static str, On)> {
    use On::Key;
    use SyncKind::*;
    let on = |cmds: &[&'static str], i: usize| cmds.iter().map(|c| (*c, Key(i))).collect::<Vec<_>>();
    // The reclaim of expired permits, on `name` at `n` and `Z` at `z`, publishing on `c`.
    let reclaim = |n: usize, z: usize, c: usize| {
        let mut v = on(&["zrangebyscore", "zrem"], z);
        v.extend(on(&["incrby"], n));
        v.push((publish, Key(c)));
        v
    };
    let mut v = match k {
        SemAcquire => on(&["get", "decrby"], 0),
        SemRelease { .. } => on(&["incrby"], 0),
        SemDrain => on(&["get", "set"], 0),
        TrySet { .. } | SemTrySetTtl | SemAdd { .. } => on(&["get", "set"], 0),
        CountDown { .. } => on(&["decr", "del"], 0),
        TrySetCount { .. } => on(&["exists", "set"], 0),
        PAcquire { .. } => {
            let mut v = reclaim(0, 1, 2);
            v.extend(on(&["get", "decrby", "pttl"], 0));
            v.extend(on(&["zadd", "pexpire", "zrange"], 1));
            v
        }
        PReleaseOne { .. } => {
            let mut v = on(&["zscore", "zrem"], 2);
            v.extend(on(&["incrby"], 0));
            v
        }
        PReleaseMany { .. } => {
            let mut v = reclaim(0, 2, 1);
            v.extend(on(&["zscore"], 2));
            v
        }
        PAvailable { .. } => {
            let mut v = reclaim(0, 1, 2);
            v.extend(on(&["get"], 0));
            v
        }
        PAcquired { .. } => {
            let mut v = reclaim(0, 1, 2);
            v.extend(on(&["zcount"], 1));
            v
        }
        PUpdateLease { .. } => {
            let mut v = reclaim(0, 1, 2);
            v.extend(on(&["zscore", "zadd"], 1));
            v
        }
        PSetPermits { .. } => {
            let mut v = on(&["get", "set", "incrby"], 0);
            v.extend(on(&["zcount"], 2));
            v
        }
    };
    // Every body but the plain acquire and drain publishes on its channel (KEYS[2], or
    // KEYS[3] where `Z` comes second).
    let channel = match k {
        SemAcquire | SemDrain => None,
        PAcquire { .. } | PAvailable { .. } | PAcquired { .. } | PUpdateLease { .. } => Some(2),
        _ => Some(1),
    };
    if let Some(c) = channel {
        if !v.iter().any(|(cmd, on)| *cmd == publish && *on == Key(c)) {
            v.push((publish, Key(c)));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redisson::table::{Publish, ROWS};

    #[test]
    fn every_inner_command_is_one_the_filter_has_a_string_for() {
        for row in ROWS {
            let keys: Vec<&[u8]> = vec![b"l"; 5];
            let argv: Vec<&[u8]> = vec![b"a"; 6];
            for env in [Env { sharded: false, cluster: false }, Env { sharded: true, cluster: false }] {
                for (cmd, on) in inner_commands(row.kind, &keys, &argv, env) {
                    assert!(COMMANDS.contains(&cmd), "{cmd} of {}", row.sha);
                    if let On::Key(i) = on {
                        assert!(i < 5);
                    }
                }
            }
        }
    }

    #[test]
    fn acquires_of_the_other_kinds_check_the_fair_queue_the_native_command_reads() {
        let keys: Vec<&[u8]> = vec![b"l", b"redisson_lock_token:{l}"];
        for kind in [Kind::LockAcquire, Kind::RwWrite] {
            let v = inner_commands(kind, &keys, &[b"30000", b"o"], Env { sharded: false, cluster: false });
            assert!(v.contains(&("lindex", On::Own(b"redisson_lock_queue:{l}".to_vec()))), "{kind:?}");
            assert!(v.contains(&("zscore", On::Own(b"redisson_lock_timeout:{l}".to_vec()))), "{kind:?}");
        }
    }

    #[test]
    fn a_read_unlock_checks_the_first_hold_and_the_channel() {
        let keys: Vec<&[u8]> = vec![b"l", b"redisson_rwlock:{l}", b"{l}:o:rwlock_timeout", b"{l}"];
        let v = inner_commands(
            Kind::RwUnlockRead { publish: Publish::Arg(3), latch: false, free_is_one: false },
            &keys,
            &[b"0", b"o", b"PUBLISH"],
            Env { sharded: false, cluster: false },
        );
        assert!(v.contains(&("publish", On::Key(1))));
        assert!(v.contains(&("del", On::Own(b"{l}:o:rwlock_timeout:1".to_vec()))));
    }
}
