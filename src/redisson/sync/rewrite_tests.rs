//! Unit tests of the synchronizers' rewrite: each Redisson body's call mapped to its native
//! command (every row, sharded and not, in a cluster and not).
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use super::*;
use crate::redisson::table::{Kind, ROWS};

const GLOBAL: Env = Env { sharded: false, cluster: false };
const SHARDED: Env = Env { sharded: true, cluster: false };
const ID: &[u8] = &[0x9c; ID_LEN];

/// KEYS and ARGV as Redisson sends them (a client clock of 1000, `until` 5000).
fn redisson_call(kind: SyncKind, name: &[u8], env: Env) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    use SyncKind::*;
    let (ch, z, lch) = (semaphore_channel(name), permit_timeouts(name), latch_channel(name));
    let p = env.publish_cmd().to_vec();
    let b = |s: &str| s.as_bytes().to_vec();
    let nl = b(&NO_LEASE.to_string());
    let t = |publish: Publish, mut v: Vec<Vec<u8>>| {
        if matches!(publish, Publish::Arg(_)) {
            v.push(p.clone());
        }
        v
    };
    let n = name.to_vec();
    match kind {
        SemAcquire => (vec![n], vec![b("2")]),
        SemRelease { publish } | TrySet { publish, .. } | SemAdd { publish } => (vec![n, ch], t(publish, vec![b("2")])),
        SemDrain => (vec![n], vec![]),
        SemTrySetTtl => (vec![n, ch], vec![b("2"), p, b("3000")]),
        CountDown { publish } => (vec![n, lch], t(publish, vec![b("0")])),
        TrySetCount { publish } => (vec![n, lch], t(publish, vec![b("1"), b("3")])),
        PAcquire { publish, ids: false } => {
            (vec![n, z, ch], t(publish, vec![b("1"), b("5000"), ID.to_vec(), b("1000"), nl]))
        }
        PAcquire { ids: true, .. } => {
            (vec![n, z, ch], vec![b("2"), b("5000"), b("1000"), nl, p, ID.to_vec(), vec![1; ID_LEN]])
        }
        PReleaseOne { publish } => (vec![n, ch, z], t(publish, vec![ID.to_vec(), b("1"), b("1000")])),
        PReleaseMany { .. } => (vec![n, ch, z], vec![b("2"), b("1000"), p, ID.to_vec(), b("other")]),
        PAvailable { publish } | PAcquired { publish } => (vec![n, z, ch], t(publish, vec![b("1000")])),
        PUpdateLease { publish } => (vec![n, z, ch], t(publish, vec![ID.to_vec(), b("5000"), b("1000")])),
        PSetPermits { publish, .. } => (vec![n, ch, z], t(publish, vec![b("4")])),
    }
}

fn refs(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

fn resolve(args: &[A], keys: &[Vec<u8>], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    args.iter()
        .map(|a| match a {
            A::Key(i) => keys[*i].clone(),
            A::Argv(i) => argv[*i].clone(),
            A::Lit(l) => l.to_vec(),
            A::Own(o) => o.clone(),
        })
        .collect()
}

#[test]
fn every_mapped_body_round_trips_through_the_native_arguments() {
    for row in ROWS {
        let Kind::Sync(kind) = row.kind else { continue };
        for env in [GLOBAL, SHARDED] {
            for name in [&b"s"[..], b"{s}", b"a{b}c"] {
                let (keys, argv) = redisson_call(kind, name, env);
                let p = plan(kind, &refs(&keys), &refs(&argv), env);
                if kind.publishes_fixed() && env.sharded {
                    assert_eq!(p, None, "{}", row.sha);
                    continue;
                }
                let p = p.unwrap_or_else(|| panic!("{} ({}) not mapped for {name:?}", row.sha, row.method));
                let native = resolve(&p, &keys, &argv);
                assert_eq!(native[0], keys[0]);
                let back = script_call(kind, &refs(&native), env, 1000);
                assert_eq!(back, Some((keys, argv)), "{} ({})", row.sha, row.method);
            }
        }
    }
}

#[test]
fn calls_the_module_would_answer_differently_stay_lua() {
    let k = SyncKind::PAcquire { publish: Publish::Fixed, ids: false };
    let (keys, mut argv) = redisson_call(k, b"s", GLOBAL);
    argv[0] = b"2".to_vec();
    assert_eq!(plan(k, &refs(&keys), &refs(&argv), GLOBAL), None, "two permits for one id");
    let (keys, mut argv) = redisson_call(k, b"s", GLOBAL);
    argv[2] = b"short".to_vec();
    assert_eq!(plan(k, &refs(&keys), &refs(&argv), GLOBAL), None, "an id not 16 bytes");
    let add = SyncKind::SemAdd { publish: Publish::Arg(2) };
    let (keys, mut argv) = redisson_call(add, b"s", GLOBAL);
    argv[0] = b"100000000000000".to_vec();
    assert_eq!(plan(add, &refs(&keys), &refs(&argv), GLOBAL), None, "a delta Lua formats as 1e+14");
    let down = SyncKind::CountDown { publish: Publish::Arg(2) };
    let (mut keys, argv) = redisson_call(down, b"s", GLOBAL);
    keys[1] = b"other-channel".to_vec();
    assert_eq!(plan(down, &refs(&keys), &refs(&argv), GLOBAL), None, "a channel the module would not use");
}

#[test]
fn a_latch_name_with_its_own_tag_is_native_outside_a_cluster_only() {
    let k = SyncKind::CountDown { publish: Publish::Arg(2) };
    let (keys, argv) = redisson_call(k, b"{s}", GLOBAL);
    let cluster = Env { sharded: false, cluster: true };
    assert!(crate::redisson::rewrite::plan(Kind::Sync(k), &refs(&keys), &refs(&argv), GLOBAL).is_some());
    assert!(crate::redisson::rewrite::plan(Kind::Sync(k), &refs(&keys), &refs(&argv), cluster).is_none());
}
