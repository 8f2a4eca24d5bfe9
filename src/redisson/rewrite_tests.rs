//! The mapping both ways, on calls built the way Redisson's sources build them.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::redisson::reverse::script_call;
use crate::redisson::table::{Kind, Publish, ROWS};

const NAMES: &[&str] = &["lock", "{tagged}", "a{b}c", "orders:42"];
const OWNER: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:57";
const GLOBAL: Env = Env { sharded: false, cluster: false };
const SHARDED: Env = Env { sharded: true, cluster: false };

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// KEYS and ARGV as Redisson passes them for `kind` (RedissonLock & co., by release).
fn redisson_call(kind: Kind, name: &str, env: Env) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let n = name.as_bytes();
    let o = OWNER.as_bytes();
    let publish = |p: Publish| match p {
        Publish::Fixed => vec![],
        Publish::Arg(_) => vec![b(if env.sharded { "SPUBLISH" } else { "PUBLISH" })],
    };
    let latch = names::unlock_latch(n, b"7b0c");
    let cat = |parts: Vec<Vec<Vec<u8>>>| parts.concat();
    match kind {
        Kind::LockAcquire | Kind::LockRenew { .. } => (vec![b(name)], vec![b("30000"), b(OWNER)]),
        Kind::LockAcquireFenced { .. } => (vec![b(name), names::token(n)], vec![b("30000"), b(OWNER)]),
        Kind::LockUnlock { publish: p, latch: l } => {
            let keys = cat(vec![vec![b(name), names::lock_channel(n)], if l { vec![latch] } else { vec![] }]);
            let argv =
                cat(vec![vec![b("0"), b("30000"), b(OWNER)], publish(p), if l { vec![b("13500")] } else { vec![] }]);
            (keys, argv)
        }
        Kind::LockForceUnlock { publish: p } => {
            (vec![b(name), names::lock_channel(n)], cat(vec![vec![b("0")], publish(p)]))
        }
        Kind::RwRead => {
            (vec![b(name), names::read_timeout_prefix(n, o)], vec![b("30000"), b(OWNER), names::write_field(o)])
        }
        Kind::RwWrite => (vec![b(name)], vec![b("30000"), names::write_field(o)]),
        Kind::RwUnlockRead { publish: p, latch: l, .. } => {
            let keys = cat(vec![
                vec![b(name), names::rwlock_channel(n), names::read_timeout_prefix(n, o), names::key_prefix(n)],
                if l { vec![latch] } else { vec![] },
            ]);
            let argv = cat(vec![vec![b("0"), b(OWNER)], publish(p), if l { vec![b("13500")] } else { vec![] }]);
            (keys, argv)
        }
        Kind::RwUnlockWrite { publish: p, latch: l, .. } => {
            let keys = cat(vec![vec![b(name), names::rwlock_channel(n)], if l { vec![latch] } else { vec![] }]);
            let argv = cat(vec![
                vec![b("1"), b("30000"), names::write_field(o)],
                publish(p),
                if l { vec![b("13500")] } else { vec![] },
            ]);
            (keys, argv)
        }
        Kind::RwForceUnlock { side, publish: p } => {
            let m = if side == Side::Read { "0" } else { "1" };
            (vec![b(name), names::rwlock_channel(n)], cat(vec![vec![b(m)], publish(p)]))
        }
        Kind::RwRenewAll { .. } => (vec![b(name), names::key_prefix(n)], vec![b("30000"), b(OWNER)]),
        Kind::RwRenewOwner => (vec![b(name), names::key_prefix(n)], vec![b("30000"), b("1"), b(OWNER)]),
        Kind::FairAcquire(_) => (
            vec![b(name), names::fair_queue(n), names::fair_timeouts(n)],
            vec![b("30000"), b(OWNER), b("5000"), b("1700000000123")],
        ),
        Kind::FairTry { .. } => (
            vec![b(name), names::fair_queue(n), names::fair_timeouts(n)],
            vec![b("30000"), b(OWNER), b("1700000000123"), b("5000")],
        ),
        Kind::FairUnlock { publish: p, latch: l, .. } => {
            let keys = cat(vec![
                vec![b(name), names::fair_queue(n), names::fair_timeouts(n), names::lock_channel(n)],
                if l { vec![latch] } else { vec![] },
            ]);
            let argv = cat(vec![
                vec![b("0"), b("30000"), b(OWNER), b("1700000000123")],
                publish(p),
                if l { vec![b("13500")] } else { vec![] },
            ]);
            (keys, argv)
        }
        Kind::FairForceUnlock { publish: p, .. } => (
            vec![b(name), names::fair_queue(n), names::fair_timeouts(n), names::lock_channel(n)],
            cat(vec![vec![b("0"), b("1700000000123")], publish(p)]),
        ),
        Kind::FairCancel => (vec![names::fair_queue(n), names::fair_timeouts(n)], vec![b(OWNER), b("5000")]),
        // Covered by sync/rewrite_tests.rs and rate/rewrite_tests.rs.
        Kind::Sync(_) | Kind::Rate(_) | Kind::Lua(_) => (vec![b(name)], vec![]),
    }
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(|x| x.as_slice()).collect()
}

/// The native arguments a plan stands for.
fn resolve(p: &Plan, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    p.args
        .iter()
        .map(|a| match a {
            A::Key(i) => keys[*i].clone(),
            A::Argv(i) => argv[*i].clone(),
            A::Lit(l) => l.to_vec(),
            A::Own(o) => o.clone(),
        })
        .collect()
}

#[test]
fn every_mapped_script_round_trips_through_the_native_arguments() {
    for row in ROWS {
        for env in [GLOBAL, SHARDED] {
            if matches!(row.kind, Kind::Lua(_) | Kind::Sync(_) | Kind::Rate(_)) {
                continue;
            }
            let fixed = row.kind.publishes_fixed();
            for name in NAMES {
                let (keys, argv) = redisson_call(row.kind, name, env);
                let p = plan(row.kind, &refs(&keys), &refs(&argv), env);
                if fixed && env.sharded {
                    // `redis.call('publish', ...)` while the module would SPUBLISH: left to Lua.
                    assert_eq!(p, None, "{} {name}", row.sha);
                    continue;
                }
                let p = p.unwrap_or_else(|| panic!("{} ({}) not mapped for {name}", row.sha, row.method));
                assert_eq!(Some(p.native), native_of(row.kind));
                let native = resolve(&p, &keys, &argv);
                if row.kind == Kind::FairCancel {
                    // `{tagged}` and `tagged` share their queue: either name is the same lock.
                    assert_eq!(names::fair_queue(&native[0]), keys[0]);
                } else {
                    assert_eq!(native[0], keys[0]);
                }
                let back = script_call(row.kind, &refs(&native), env, 1_700_000_000_123);
                assert_eq!(back, Some((keys, argv)), "{} ({}) for {name}", row.sha, row.method);
            }
        }
    }
}

fn acquire(keys: &[&str], argv: &[&str]) -> Option<Plan> {
    let k: Vec<&[u8]> = keys.iter().map(|s| s.as_bytes()).collect();
    let a: Vec<&[u8]> = argv.iter().map(|s| s.as_bytes()).collect();
    plan(Kind::LockUnlock { publish: Publish::Arg(4), latch: false }, &k, &a, GLOBAL)
}

#[test]
fn the_publish_command_passed_as_an_argument_matches_in_any_case_as_lua_looks_it_up() {
    let ch = "redisson_lock__channel:{l}";
    for cmd in ["PUBLISH", "publish", "Publish"] {
        assert!(acquire(&["l", ch], &["0", "100", "o", cmd]).is_some(), "{cmd}");
    }
    let sharded = Env { sharded: true, cluster: false };
    let k: Vec<&[u8]> = vec![b"l", ch.as_bytes()];
    for (cmd, ok) in [("spublish", true), ("SPUBLISH", true), ("publish", false)] {
        let a: Vec<&[u8]> = vec![b"0", b"100", b"o", cmd.as_bytes()];
        let planned = plan(Kind::LockUnlock { publish: Publish::Arg(4), latch: false }, &k, &a, sharded);
        assert_eq!(planned.is_some(), ok, "{cmd} while the module publishes sharded");
    }
}

#[test]
fn keys_or_arguments_the_module_would_not_derive_leave_the_call_to_lua() {
    let ch = "redisson_lock__channel:{l}";
    assert!(acquire(&["l", ch], &["0", "100", "o", "PUBLISH"]).is_some());
    // A NameMapper / key prefix: the channel is not the one derived from the key.
    assert_eq!(acquire(&["app:l", ch], &["0", "100", "o", "PUBLISH"]), None);
    assert_eq!(acquire(&["l", "my_channel"], &["0", "100", "o", "PUBLISH"]), None);
    // Another message, publish command, or a lease the native parser would not take.
    assert_eq!(acquire(&["l", ch], &["1", "100", "o", "PUBLISH"]), None);
    assert_eq!(acquire(&["l", ch], &["0", "100", "o", "SPUBLISH"]), None);
    assert_eq!(acquire(&["l", ch], &["0", "100", "o", "PUBLISHX"]), None);
    for lease in ["0", "-5", "010", "1.5", "", "99999999999999999999"] {
        assert_eq!(acquire(&["l", ch], &["0", lease, "o", "PUBLISH"]), None, "{lease}");
    }
    // Extra or missing arguments and keys.
    assert_eq!(acquire(&["l", ch], &["0", "100", "o", "PUBLISH", "x"]), None);
    assert_eq!(acquire(&["l", ch, "x"], &["0", "100", "o", "PUBLISH"]), None);
    assert_eq!(acquire(&["l"], &["0", "100", "o"]), None);
}

#[test]
fn a_name_whose_derived_keys_land_in_another_slot_is_left_to_lua() {
    // `a{}b` hashes whole; `redisson_lock__channel:a{}b` hashes whole too, elsewhere.
    for name in ["a{}b", "x}y", "half{open"] {
        let (keys, argv) = redisson_call(Kind::LockUnlock { publish: Publish::Arg(4), latch: true }, name, GLOBAL);
        assert_eq!(
            plan(Kind::LockUnlock { publish: Publish::Arg(4), latch: true }, &refs(&keys), &refs(&argv), GLOBAL),
            None,
            "{name}"
        );
    }
    assert_eq!(slot_part(b"{a}b"), b"a");
    assert_eq!(slot_part(b"a{}b"), b"a{}b");
    assert_eq!(slot_part(b"p:{x}:{y}"), b"x");
}

#[test]
fn read_write_owners_are_checked_against_their_fields() {
    let k = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
    // A write lock's owner must end in `:write`; `mode` is never an owner.
    assert_eq!(plan(Kind::RwWrite, &refs(&k(&["l"])), &refs(&k(&["100", "o"])), GLOBAL), None);
    assert_eq!(plan(Kind::RwWrite, &refs(&k(&["l"])), &refs(&k(&["100", "mode:write"])), GLOBAL), None);
    let p = plan(Kind::RwWrite, &refs(&k(&["l"])), &refs(&k(&["100", "o:1:write"])), GLOBAL);
    assert_eq!(p.map(|p| p.args), Some(vec![A::Key(0), A::Own(b("o:1")), A::Argv(0)]));
    // A read lock's timeout prefix must be the owner's.
    let keys = k(&["l", "{l}:other:rwlock_timeout"]);
    assert_eq!(plan(Kind::RwRead, &refs(&keys), &refs(&k(&["100", "o", "o:write"])), GLOBAL), None);
}

#[test]
fn a_fair_cancel_finds_the_lock_name_behind_its_queue() {
    assert_eq!(fair_name(b"redisson_lock_queue:{orders}"), Some(b("orders")));
    assert_eq!(fair_name(b"redisson_lock_queue:a{b}c"), Some(b("a{b}c")));
    assert_eq!(fair_name(b"redisson_lock_queue:plain"), None);
    assert_eq!(fair_name(b"other:{orders}"), None);
}
