//! Part 1's workloads as a table: for each command form, the module call, the Lua reference call
//! with its KEYS and ARGV, the raw writes that set the state up, and the reply every call must get.
//!
//! Setup uses plain commands (HSET, SET, RPUSH, ZADD): they never count in the measured command's
//! `INFO commandstats` line, and they build the same state on both servers.

use crate::names::*;
use crate::strs;

/// The lease every workload asks for, ms.
pub const LEASE: &str = "30000";
/// The fair lock's wait time, ms.
pub const WAIT: &str = "5000";
/// Another client's owner id.
pub const OTHER: &str = "3f1c2d4e-0000-4000-8000-000000000002:7";

/// What each call of a workload must reply.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    Nil,
    Int(i64),
    PositiveInt,
    /// RFencedLock's grant: `[-1, token]` with token > 0.
    Granted,
    Ok,
    /// `GCRA` or `CL.THROTTLE`: five integers, the first 1 when limited (true), 0 when not.
    Limited(bool),
}

impl Expect {
    pub fn check(self, v: &redis::Value) -> bool {
        use redis::Value as V;
        match (self, v) {
            (Expect::Nil, V::Nil) => true,
            (Expect::Int(n), V::Int(m)) => n == *m,
            (Expect::PositiveInt, V::Int(m)) => *m > 0,
            (Expect::Granted, V::Array(a)) => matches!(a.as_slice(), [V::Int(-1), V::Int(t)] if *t > 0),
            (Expect::Ok, V::Okay) => true,
            (Expect::Ok, V::SimpleString(s)) => s == "OK",
            (Expect::Limited(l), V::Array(a)) => {
                a.len() == 5 && a.iter().all(|x| matches!(x, V::Int(_))) && a[0] == V::Int(i64::from(l))
            }
            _ => false,
        }
    }
}

/// One call's context: a fresh lock key, the caller's owner id, and the client clock.
pub struct Ctx {
    pub key: String,
    pub owner: String,
    pub now: i64,
}

type Build = fn(&Ctx) -> Vec<String>;
type LuaBuild = fn(&Ctx) -> (Vec<String>, Vec<String>);
type Setup = fn(&Ctx) -> Vec<Vec<String>>;

/// A row of part 1.
pub struct Workload {
    pub name: &'static str,
    /// The module command (checked with `COMMAND INFO`; its commandstats line is measured).
    pub command: &'static str,
    pub module: Build,
    /// The Lua reference's file stem in bench/lua/.
    pub script: &'static str,
    pub lua: LuaBuild,
    pub setup: Setup,
    pub expect: Expect,
}

fn none(_: &Ctx) -> Vec<Vec<String>> {
    vec![]
}

/// `owner` holds `key` `n` times (a reentrant or fair lock).
fn held(c: &Ctx, owner: &str, n: i64) -> Vec<Vec<String>> {
    vec![strs(&["HSET", &c.key, owner, &n.to_string()]), strs(&["PEXPIRE", &c.key, LEASE])]
}

/// `w` waiters queued on a fair lock, with deadlines well in the future.
fn queued(c: &Ctx, w: usize) -> Vec<Vec<String>> {
    let mut out = vec![];
    for i in 1..=w {
        let name = format!("waiter-{i}");
        out.push(strs(&["RPUSH", &fair_queue(&c.key), &name]));
        let deadline = (c.now + 30_000 + 5_000 * i as i64).to_string();
        out.push(strs(&["ZADD", &fair_timeouts(&c.key), &deadline, &name]));
    }
    out
}

fn kv(keys: &[String], args: &[&str]) -> (Vec<String>, Vec<String>) {
    (keys.to_vec(), strs(args))
}

#[rustfmt::skip]
pub fn table() -> Vec<Workload> {
    vec![
        Workload { name: "acquire free", command: "LOCK.ACQUIRE",
            module: |c| strs(&["LOCK.ACQUIRE", &c.key, &c.owner, LEASE]),
            script: "lock_acquire", lua: |c| kv(std::slice::from_ref(&c.key), &[&c.owner, LEASE]),
            setup: none, expect: Expect::Nil },
        Workload { name: "acquire free, TOKEN", command: "LOCK.ACQUIRE",
            module: |c| strs(&["LOCK.ACQUIRE", &c.key, &c.owner, LEASE, "TOKEN"]),
            script: "lock_acquire_token", lua: |c| kv(&[c.key.clone(), token(&c.key)], &[&c.owner, LEASE]),
            setup: none, expect: Expect::Granted },
        Workload { name: "reentrant acquire", command: "LOCK.ACQUIRE",
            module: |c| strs(&["LOCK.ACQUIRE", &c.key, &c.owner, LEASE]),
            script: "lock_acquire", lua: |c| kv(std::slice::from_ref(&c.key), &[&c.owner, LEASE]),
            setup: |c| held(c, &c.owner, 1), expect: Expect::Nil },
        Workload { name: "acquire refused", command: "LOCK.ACQUIRE",
            module: |c| strs(&["LOCK.ACQUIRE", &c.key, &c.owner, LEASE]),
            script: "lock_acquire", lua: |c| kv(std::slice::from_ref(&c.key), &[&c.owner, LEASE]),
            setup: |c| held(c, OTHER, 1), expect: Expect::PositiveInt },
        Workload { name: "unlock to zero", command: "LOCK.UNLOCK",
            module: |c| strs(&["LOCK.UNLOCK", &c.key, &c.owner, LEASE]),
            script: "lock_unlock", lua: |c| kv(&[c.key.clone(), lock_channel(&c.key)], &[&c.owner, LEASE]),
            setup: |c| held(c, &c.owner, 1), expect: Expect::Int(1) },
        Workload { name: "partial unlock", command: "LOCK.UNLOCK",
            module: |c| strs(&["LOCK.UNLOCK", &c.key, &c.owner, LEASE]),
            script: "lock_unlock", lua: |c| kv(&[c.key.clone(), lock_channel(&c.key)], &[&c.owner, LEASE]),
            setup: |c| held(c, &c.owner, 2), expect: Expect::Int(0) },
        Workload { name: "renew", command: "LOCK.RENEW",
            module: |c| strs(&["LOCK.RENEW", &c.key, &c.owner, LEASE]),
            script: "lock_renew", lua: |c| kv(std::slice::from_ref(&c.key), &[&c.owner, LEASE]),
            setup: |c| held(c, &c.owner, 1), expect: Expect::Int(1) },
        Workload { name: "force unlock", command: "LOCK.FORCEUNLOCK",
            module: |c| strs(&["LOCK.FORCEUNLOCK", &c.key]),
            script: "lock_forceunlock", lua: |c| kv(&[c.key.clone(), lock_channel(&c.key)], &[]),
            setup: |c| held(c, &c.owner, 1), expect: Expect::Int(1) },
        Workload { name: "read acquire", command: "RWLOCK.RLOCK",
            module: |c| strs(&["RWLOCK.RLOCK", &c.key, &c.owner, LEASE]),
            script: "rwlock_rlock", lua: |c| kv(&[c.key.clone(), read_timeout_prefix(&c.key, &c.owner)], &[&c.owner, LEASE]),
            setup: none, expect: Expect::Nil },
        Workload { name: "write acquire", command: "RWLOCK.WLOCK",
            module: |c| strs(&["RWLOCK.WLOCK", &c.key, &c.owner, LEASE]),
            script: "rwlock_wlock", lua: |c| kv(std::slice::from_ref(&c.key), &[&c.owner, LEASE]),
            setup: none, expect: Expect::Nil },
        Workload { name: "read unlock (last hold)", command: "RWLOCK.UNLOCK",
            module: |c| strs(&["RWLOCK.UNLOCK", &c.key, &c.owner, "READ", LEASE]),
            script: "rwlock_unlock_read",
            lua: |c| kv(&[c.key.clone(), rwlock_channel(&c.key), read_timeout_prefix(&c.key, &c.owner), key_prefix(&c.key)], &[&c.owner, LEASE]),
            setup: |c| read_held(c, &c.owner), expect: Expect::Int(1) },
        Workload { name: "write unlock", command: "RWLOCK.UNLOCK",
            module: |c| strs(&["RWLOCK.UNLOCK", &c.key, &c.owner, "WRITE", LEASE]),
            script: "rwlock_unlock_write", lua: |c| kv(&[c.key.clone(), rwlock_channel(&c.key)], &[&c.owner, LEASE]),
            setup: |c| vec![strs(&["HSET", &c.key, "mode", "write", &format!("{}:write", c.owner), "1"]), strs(&["PEXPIRE", &c.key, LEASE])],
            expect: Expect::Int(1) },
        Workload { name: "fair acquire free", command: "FAIRLOCK.ACQUIRE",
            module: |c| strs(&["FAIRLOCK.ACQUIRE", &c.key, &c.owner, LEASE, WAIT]),
            script: "fair_acquire",
            lua: |c| kv(&[c.key.clone(), fair_queue(&c.key), fair_timeouts(&c.key)], &[&c.owner, LEASE, WAIT, &c.now.to_string()]),
            setup: none, expect: Expect::Nil },
        Workload { name: "fair enqueue behind 2 waiters", command: "FAIRLOCK.ACQUIRE",
            module: |c| strs(&["FAIRLOCK.ACQUIRE", &c.key, &c.owner, LEASE, WAIT]),
            script: "fair_acquire",
            lua: |c| kv(&[c.key.clone(), fair_queue(&c.key), fair_timeouts(&c.key)], &[&c.owner, LEASE, WAIT, &c.now.to_string()]),
            setup: |c| [held(c, OTHER, 1), queued(c, 2)].concat(), expect: Expect::PositiveInt },
        Workload { name: "fair unlock (1 waiter)", command: "FAIRLOCK.UNLOCK",
            module: |c| strs(&["FAIRLOCK.UNLOCK", &c.key, &c.owner, LEASE]),
            script: "fair_unlock",
            lua: |c| kv(&[c.key.clone(), fair_queue(&c.key), fair_timeouts(&c.key), lock_channel(&c.key)], &[&c.owner, LEASE, &c.now.to_string()]),
            setup: |c| [held(c, &c.owner, 1), queued(c, 1)].concat(), expect: Expect::Int(1) },
    ]
}

/// `owner` holds one read hold on `key` (hash, timeout key `T:1`, leases).
pub fn read_held(c: &Ctx, owner: &str) -> Vec<Vec<String>> {
    vec![
        strs(&["HSET", &c.key, "mode", "read", owner, "1"]),
        strs(&["PEXPIRE", &c.key, LEASE]),
        strs(&["SET", &format!("{}:1", read_timeout_prefix(&c.key, owner)), "1", "PX", LEASE]),
    ]
}

/// The baseline: the cheapest possible lock on a fresh key.
pub fn set_nx_px(c: &Ctx) -> Vec<String> {
    strs(&["SET", &c.key, &c.owner, "NX", "PX", LEASE])
}
