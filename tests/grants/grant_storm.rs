//! The storm (issue 29): clients parked on every kind (reentrant, fenced, read-write and fair
//! locks, semaphores, expirable semaphores, latches) while the holders release, and with their
//! releases, in pipelines and in `MULTI`/`EXEC`, `CLIENT UNBLOCK ... ERROR|TIMEOUT` and
//! `CLIENT KILL` the other clients waiting for the same thing, and a chaos thread does the
//! same at random, for a bounded time (`STORM_MS`, 8 s by default; `STORM_SEED`).
//!
//! Checked throughout: every acquire gets exactly one reply (a PING rides behind each); a
//! client told granted holds exactly that (`*.HOLDS`, the permits' leases), and one told
//! anything else, or killed, holds nothing once the give-back ran. At the end: every lock is
//! free, every permit is back (none lost, none doubled), and a replica equals the primary.

use crate::common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::answers::{Answer, Pinged};
use common::diff::env;
use common::parked::lockmod_field;
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Lock,
    Fenced,
    ReadWrite,
    Fair,
    Semaphore,
    Permits,
    Latch,
}

const KINDS: [Kind; 7] =
    [Kind::Lock, Kind::Fenced, Kind::ReadWrite, Kind::Fair, Kind::Semaphore, Kind::Permits, Kind::Latch];
/// Permits of the semaphore and of the expirable semaphore.
const SEM_PERMITS: i64 = 3;
const PSEM_PERMITS: i64 = 2;
const LEASE: &str = "600000";

/// What a client holds after a grant.
#[derive(Debug)]
enum Holding {
    Lock,
    Read,
    Write,
    Fair,
    Permits(i64),
    Ids(Vec<String>),
    /// A latch's wait takes nothing.
    Nothing,
}

/// What the threads share: who is waiting for what, and what happened.
#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    /// Held by a disruption (with a kill: from its check that the target is parked until the
    /// kill ran), and by a client sending an acquire (see `run_with_disruption`).
    gate: Mutex<()>,
    /// Per kind, the connections sending acquires now (the disruptions' targets): their ids,
    /// and whether their BLOCK has no time limit.
    waiting: Mutex<HashMap<Kind, Vec<(i64, bool)>>>,
    granted: AtomicU64,
    refused: AtomicU64,
    unblocked: AtomicU64,
    killed: AtomicU64,
    disruptions: AtomicU64,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// What a client holds after `reply` to its acquire `args`: None if it was not a grant.
type Grant = fn(&Value, &[String]) -> Option<Holding>;

/// The acquire a client of `kind` sends as `owner`, and what it holds if granted.
fn acquire(kind: Kind, owner: &str, r: &mut SmallRng) -> (Vec<String>, Grant) {
    let nil = |v: &Value, _: &[String]| (*v == Value::Nil).then_some(Holding::Lock);
    match kind {
        Kind::Lock => (strs(&["LOCK.ACQUIRE", "L", owner, LEASE]), nil),
        Kind::Fenced => (strs(&["LOCK.ACQUIRE", "T", owner, LEASE, "TOKEN"]), |v, _| {
            matches!(v, Value::Array(a) if a[0] == Value::Int(-1)).then_some(Holding::Lock)
        }),
        Kind::ReadWrite if r.gen_bool(0.5) => {
            (strs(&["RWLOCK.RLOCK", "RW", owner, LEASE]), |v, _| (*v == Value::Nil).then_some(Holding::Read))
        }
        Kind::ReadWrite => {
            (strs(&["RWLOCK.WLOCK", "RW", owner, LEASE]), |v, _| (*v == Value::Nil).then_some(Holding::Write))
        }
        Kind::Fair => (strs(&["FAIRLOCK.ACQUIRE", "F", owner, LEASE, "60000"]), |v, _| {
            (*v == Value::Nil).then_some(Holding::Fair)
        }),
        Kind::Semaphore => {
            let n = r.gen_range(1..=2).to_string();
            (strs(&["SEMAPHORE.ACQUIRE", "S", &n]), |v, a| {
                (*v == Value::Int(1)).then(|| Holding::Permits(a[2].parse().expect("permits")))
            })
        }
        Kind::Permits => (strs(&["PSEMAPHORE.ACQUIRE", "P", "1", LEASE]), |v, _| match v {
            Value::Array(ids) => Some(Holding::Ids(redis::from_redis_value(&Value::Array(ids.clone())).expect("ids"))),
            _ => None,
        }),
        Kind::Latch => (strs(&["COUNTDOWN.AWAIT", "C"]), |v, _| (*v == Value::Int(1)).then_some(Holding::Nothing)),
    }
}

/// The release of `h`, as `owner`.
fn release(kind: Kind, owner: &str, h: &Holding) -> Vec<String> {
    match h {
        Holding::Lock if kind == Kind::Fenced => strs(&["LOCK.UNLOCK", "T", owner, LEASE]),
        Holding::Lock => strs(&["LOCK.UNLOCK", "L", owner, LEASE]),
        Holding::Read => strs(&["RWLOCK.UNLOCK", "RW", owner, "READ", LEASE]),
        Holding::Write => strs(&["RWLOCK.UNLOCK", "RW", owner, "WRITE", LEASE]),
        Holding::Fair => strs(&["FAIRLOCK.UNLOCK", "F", owner, LEASE]),
        Holding::Permits(n) => strs(&["SEMAPHORE.RELEASE", "S", &n.to_string()]),
        Holding::Ids(ids) => [strs(&["PSEMAPHORE.RELEASE", "P"]), ids.clone()].concat(),
        // Counting the latch down is the release that opens it for the others.
        Holding::Nothing => strs(&["COUNTDOWN.DECR", "C"]),
    }
}

/// What `owner` holds now, from the keyspace: lock holds, or the leases of `ids`.
fn holds(c: &mut redis::Connection, kind: Kind, owner: &str, ids: &[String]) -> String {
    let q = |c: &mut redis::Connection, a: &[&str]| format!("{:?}", ok(c, a));
    match kind {
        Kind::Lock => q(c, &["LOCK.HOLDS", "L", owner]),
        Kind::Fenced => q(c, &["LOCK.HOLDS", "T", owner]),
        Kind::ReadWrite => q(c, &["RWLOCK.HOLDS", "RW", owner]),
        Kind::Fair => q(c, &["FAIRLOCK.HOLDS", "F", owner]),
        Kind::Permits => {
            // The zset holds the ids' bytes; replies give them in hex.
            let bytes = |hex: &str| -> Vec<u8> {
                (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex")).collect()
            };
            let held = ids.iter().filter(|id| {
                let member = bytes(id);
                let score: Option<f64> = redis::cmd("ZSCORE").arg("{P}:timeout").arg(member).query(c).expect("ZSCORE");
                score.is_some()
            });
            format!("{} leased", held.count())
        }
        Kind::Semaphore | Kind::Latch => String::new(),
    }
}

/// What `holds` reads for a client holding `h` (or nothing).
fn expected(kind: Kind, h: Option<&Holding>) -> String {
    match (kind, h) {
        (Kind::ReadWrite, Some(Holding::Read)) => "array([int(1), int(0)])".into(),
        (Kind::ReadWrite, Some(Holding::Write)) => "array([int(0), int(1)])".into(),
        (Kind::ReadWrite, _) => "array([int(0), int(0)])".into(),
        (Kind::Permits, Some(Holding::Ids(ids))) => format!("{} leased", ids.len()),
        (Kind::Permits, _) => "0 leased".into(),
        (Kind::Semaphore | Kind::Latch, _) => String::new(),
        (_, Some(_)) => "int(1)".into(),
        (_, None) => "int(0)".into(),
    }
}

/// Waits until `owner` holds what `h` says (a grant given back goes from a 0 ms timer).
fn settle(c: &mut redis::Connection, kind: Kind, owner: &str, ids: &[String], h: Option<&Holding>, answer: &Answer) {
    let want = expected(kind, h);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = holds(c, kind, owner, ids);
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "{owner} ({kind:?}) holds {now}, told {answer:?}: {h:?}");
        thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `steps` (a release, or nothing) as one pipeline, in `MULTI`/`EXEC` or not, with a
/// disruption of another client waiting for `kind` when one does: unblocked with an error or
/// as timed out, or killed. True if a disruption went.
///
/// A kill must not drop a reply Redis already gave the client (to its output buffer): that
/// is a reply lost with its connection, as any command's, not this test's race. So a client
/// is killed only while its BLOCK has no time limit (no timeout reply can come) and while it
/// is still parked (`CLIENT LIST` says `b`), and nothing but releases can reach it between
/// that check and the kill: the client sends its next acquire, and the other disruptions
/// run, only under `gate`. What a release grants it meanwhile is the module's to answer or
/// give back.
fn run_with_disruption(
    c: &mut redis::Connection,
    shared: &Shared,
    kind: Kind,
    mut steps: Vec<Vec<String>>,
    me: i64,
    r: &mut SmallRng,
) -> bool {
    let atomic = r.gen_bool(0.5);
    let _gate = shared.gate.lock().expect("lock");
    let others: Vec<(i64, bool)> = {
        let waiting = shared.waiting.lock().expect("lock");
        waiting.get(&kind).into_iter().flatten().copied().filter(|&(id, _)| id != me).collect()
    };
    let Some(&(id, no_limit)) = others.get(r.gen_range(0..others.len().max(1))) else {
        return run_steps(c, &steps, atomic);
    };
    let id = id.to_string();
    let mode = r.gen_range(0..5);
    if mode < 4 || !no_limit {
        steps.push(strs(&["CLIENT", "UNBLOCK", &id, if mode % 2 == 0 { "ERROR" } else { "TIMEOUT" }]));
        run_steps(c, &steps, atomic);
        return true;
    }
    let line: String = redis::cmd("CLIENT").arg("LIST").arg("ID").arg(&id).query(c).expect("CLIENT LIST");
    let parked = line.split(' ').any(|f| f.strip_prefix("flags=").is_some_and(|f| f.contains('b')));
    if parked {
        steps.push(strs(&["CLIENT", "KILL", "ID", &id]));
    }
    run_steps(c, &steps, atomic);
    parked
}

/// Runs `steps` as one pipeline, in `MULTI`/`EXEC` or not.
fn run_steps(c: &mut redis::Connection, steps: &[Vec<String>], atomic: bool) -> bool {
    if steps.is_empty() {
        return false;
    }
    let mut p = redis::pipe();
    if atomic {
        p.atomic();
    }
    for s in steps {
        p.cmd(&s[0]).arg(&s[1..]);
    }
    let _: Value = p.query(c).expect("pipeline");
    false
}

/// One client waiting for `kind` again and again as `owner`, until `shared.stop`.
fn client(s: &Server, shared: &Shared, kind: Kind, owner: String, seed: u64) {
    let mut r = SmallRng::seed_from_u64(seed);
    // Releases and checks go on a connection nobody unblocks or kills.
    let mut c = s.conn();
    let mut w = Pinged::connect(s);
    while !shared.stop.load(SeqCst) {
        let (mut args, grant) = acquire(kind, &owner, &mut r);
        let block = if r.gen_ratio(2, 5) { 0 } else { r.gen_range(20..300) };
        args.extend(strs(&["BLOCK", &block.to_string()]));
        {
            // Not while a disruption is on its way: it was meant for the acquire before.
            let _gate = shared.gate.lock().expect("lock");
            shared.waiting.lock().expect("lock").entry(kind).or_default().push((w.id, block == 0));
            w.send(&args.iter().map(String::as_str).collect::<Vec<_>>());
        }
        let answer = w.answer_or_gone();
        shared.waiting.lock().expect("lock").entry(kind).or_default().retain(|&(id, _)| id != w.id);
        let held = match &answer {
            Answer::Reply(v) => grant(v, &args),
            _ => None,
        };
        let counter = match (&answer, &held) {
            (_, Some(_)) => &shared.granted,
            (Answer::Reply(_), None) => &shared.refused,
            (Answer::Error(e), None) => {
                assert!(e.starts_with("UNBLOCKED"), "{owner}: {e}");
                &shared.unblocked
            }
            (Answer::Gone, None) => &shared.killed,
        };
        counter.fetch_add(1, SeqCst);
        let ids = match &held {
            Some(Holding::Ids(ids)) => ids.clone(),
            _ => Vec::new(),
        };
        // Told granted: it holds exactly that; told anything else: nothing, once any grant
        // that raced is given back.
        settle(&mut c, kind, &owner, &ids, held.as_ref(), &answer);
        if let Some(h) = held {
            thread::sleep(Duration::from_micros(r.gen_range(0..3000)));
            let steps = vec![release(kind, &owner, &h)];
            let disrupted = if r.gen_bool(0.6) {
                run_with_disruption(&mut c, shared, kind, steps, w.id, &mut r)
            } else {
                run_steps(&mut c, &steps, r.gen_bool(0.5))
            };
            if disrupted {
                shared.disruptions.fetch_add(1, SeqCst);
            }
            if let Holding::Ids(ids) = &h {
                settle(&mut c, kind, &owner, ids, None, &Answer::Reply(Value::Okay));
            }
        }
        if !w.alive() {
            w = Pinged::connect(s);
        }
        if kind == Kind::Latch {
            ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "C", "2"]);
        }
    }
}

/// Unblocks and kills clients waiting for anything, and counts the latch down, at random.
fn chaos(s: &Server, shared: &Shared, seed: u64) {
    let mut r = SmallRng::seed_from_u64(seed);
    let mut c = s.conn();
    while !shared.stop.load(SeqCst) {
        let kind = KINDS[r.gen_range(0..KINDS.len())];
        let steps = if kind == Kind::Latch { vec![strs(&["COUNTDOWN.DECR", "C"])] } else { Vec::new() };
        run_with_disruption(&mut c, shared, kind, steps, -1, &mut r);
        thread::sleep(Duration::from_millis(r.gen_range(1..20)));
    }
}

#[test]
fn a_storm_of_unblocks_and_kills_racing_grants_loses_no_grant_and_no_reply() {
    let s = Arc::new(Server::start());
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "S", &SEM_PERMITS.to_string()]);
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "P", &PSEM_PERMITS.to_string()]);
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "C", "2"]);
    let (seed, ms) = (env("STORM_SEED", 29), env("STORM_MS", 8000));
    eprintln!("STORM_SEED={seed} STORM_MS={ms}");
    let shared = Arc::new(Shared::default());
    let mut threads = Vec::new();
    for (i, kind) in KINDS.iter().chain(KINDS.iter()).chain(KINDS.iter()).enumerate() {
        let (s, shared, kind) = (s.clone(), shared.clone(), *kind);
        threads.push(thread::spawn(move || client(&s, &shared, kind, format!("c{i}"), seed + i as u64)));
    }
    let (s2, sh2) = (s.clone(), shared.clone());
    threads.push(thread::spawn(move || chaos(&s2, &sh2, seed + 1000)));
    thread::sleep(Duration::from_millis(ms));
    shared.stop.store(true, SeqCst);
    // Clients parked with no limit are let go: each gets its refusal, or a grant it releases.
    let deadline = Instant::now() + Duration::from_secs(60);
    while threads.iter().any(|t| !t.is_finished()) {
        let ids: Vec<i64> = shared.waiting.lock().expect("lock").values().flatten().map(|&(id, _)| id).collect();
        for id in ids {
            ok(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), "TIMEOUT"]);
        }
        ok(&mut c, &["COUNTDOWN.DECR", "C"]);
        assert!(Instant::now() < deadline, "the clients did not stop");
        thread::sleep(Duration::from_millis(20));
    }
    for t in threads {
        t.join().expect("a client thread failed");
    }
    let n = |a: &AtomicU64| a.load(SeqCst);
    let given_back = lockmod_field(&mut c, "grants_given_back");
    eprintln!(
        "granted {}, refused {}, unblocked with an error {}, killed {}, disruptions with a release {}, given back {given_back}",
        n(&shared.granted),
        n(&shared.refused),
        n(&shared.unblocked),
        n(&shared.killed),
        n(&shared.disruptions),
    );
    // Every lock free, every permit back, nothing parked.
    for key in ["L", "T", "RW", "F", "{P}:timeout", "redisson_lock_queue:{F}", "redisson_lock_timeout:{F}"] {
        assert_eq!(call(&mut c, &["EXISTS", key]), Ok(Value::Int(0)), "{key} is left");
    }
    assert_eq!(ok(&mut c, &["SEMAPHORE.AVAILABLE", "S"]), Value::Int(SEM_PERMITS), "semaphore permits");
    assert_eq!(ok(&mut c, &["PSEMAPHORE.AVAILABLE", "P"]), Value::Int(PSEM_PERMITS), "expirable permits");
    assert_eq!(lockmod_field(&mut c, "blocked_now"), 0);
    // The storm did race grants with unblocks.
    assert!(n(&shared.granted) > 100 && n(&shared.unblocked) > 10 && n(&shared.killed) > 10, "too quiet a storm");
    assert!(given_back > 0, "no grant raced an unblock or a kill");
    wait_replica(&mut c);
    assert_eq!(diff::dump(&mut c), diff::dump(&mut replica.conn()), "the replica differs");
}
