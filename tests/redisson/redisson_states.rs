//! Every body of Redisson's lock scripts, on every kind of lock state, run by a plain server
//! (Lua) and by one with `lockmod.redisson-scripts native`: replies, keyspaces (TTLs within the
//! tolerance) and published messages must be equal.
//!
//! The random differential run (`tests/redisson/diff_redisson.rs`) mixes the bodies of one family
//! on the states that family makes. This run puts each body in front of every state any family (or
//! another client) can leave under a name: free; held by the caller and by another owner as a
//! reentrant lock, a fenced lock, a fair lock with and without queued waiters (live and expired), a
//! write lock, a read lock with one and several readers, read holds whose timeout keys expired, a
//! writer that also reads; the unlock latch present. A Redisson application meets these when two
//! lock classes share a name, and the module's own rules for its commands (one kind per name, no
//! jumping a fair queue) must never change what a Redisson body answers: the accelerated call
//! answers as the Lua does, or is left to Lua.
//!
//! The run also measures which calls ran natively: on the states a body's own class makes
//! (ordinary use, [`ordinary`]) every call must, and the table printed at the end says which
//! (body, state) pairs went to Lua.

use crate::common;

use common::diff::now_ms;
use common::names;
use common::redisson::{causes, field, ScriptPair, Scripts, CAUSES};
use common::redisson_calls::{call, role, Choices, Role};

const NAME: &str = "lock";
/// The caller: every call is made by this owner.
const ME: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:1";
/// Another owner.
const THEM: &str = "0d9e8f7a-6b5c-4d3e-8f1a-abcdefabcdef:77";
/// A fair waiter that is neither.
const WAITER: &str = "5a5a5a5a-1111-2222-3333-444455556666:9";
const REQUEST: &str = "00000000000000aa";
const LEASE_MS: i64 = 30_000;
const MAX: &str = "9223372036854775807";

/// Who holds the lock in a state.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Holder {
    Me,
    Them,
}

impl Holder {
    fn id(self) -> &'static str {
        match self {
            Holder::Me => ME,
            Holder::Them => THEM,
        }
    }
}

/// A state: its name and the commands that make it (the same on both servers).
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Free,
    Reentrant(Holder),
    ReentrantTwice(Holder),
    /// A hold count at the top of the 64-bit range: one more `HINCRBY` overflows.
    ReentrantMax(Holder),
    /// The same for a read hold count and a write hold count.
    ReadMax(Holder),
    WriteMax(Holder),
    /// A reentrant hash without expiry (PERSIST).
    ReentrantForever(Holder),
    Fenced(Holder),
    Fair(Holder),
    /// Held, a live waiter queued behind.
    FairQueued(Holder),
    /// Held, a waiter whose deadline passed still queued.
    FairQueuedExpired(Holder),
    /// Free, a live waiter queued (the lock is its to take).
    FairFreeQueued,
    /// Free, the caller itself queued with a live deadline.
    FairFreeMeQueued,
    Write(Holder),
    /// A write lock without expiry (PERSIST): its reentry adds the lease to a PTTL of -1.
    WriteForever(Holder),
    Read(Holder),
    /// The holder with two read holds, the other owner with one.
    ReadSeveral(Holder),
    /// A read hold whose timeout key is gone (the hold expired, the field remains).
    ReadExpired(Holder),
    /// The holder writes and also reads.
    WriteThenRead(Holder),
    /// A reentrant lock and the caller's unlock latch, as left by an unlock whose reply was lost.
    LatchReleased(Holder),
    /// Another type under the name.
    WrongType,
}

fn states() -> Vec<State> {
    use Holder::*;
    use State::*;
    let mut v = vec![Free, FairFreeQueued, FairFreeMeQueued, WrongType];
    for h in [Me, Them] {
        v.extend([
            Reentrant(h),
            ReentrantTwice(h),
            ReentrantForever(h),
            ReentrantMax(h),
            ReadMax(h),
            WriteMax(h),
            Fenced(h),
            Fair(h),
            FairQueued(h),
            FairQueuedExpired(h),
            Write(h),
            WriteForever(h),
            Read(h),
            ReadSeveral(h),
            ReadExpired(h),
            WriteThenRead(h),
            LatchReleased(h),
        ]);
    }
    v
}

fn cmd(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The commands that make `state` under [`NAME`]; `now` is the test's clock (ms).
fn setup(state: State, now: i64) -> Vec<Vec<String>> {
    use State::*;
    let lease = LEASE_MS.to_string();
    let held = |owner: &str, count: &str| vec![cmd(&["HSET", NAME, owner, count]), cmd(&["PEXPIRE", NAME, &lease])];
    let queued = |waiter: &str, deadline: i64| {
        vec![
            cmd(&["RPUSH", &names::fair_queue(NAME), waiter]),
            cmd(&["ZADD", &names::fair_timeouts(NAME), &deadline.to_string(), waiter]),
        ]
    };
    let read_hold = |owner: &str, i: i64| cmd(&["SET", &names::read_timeout(NAME, owner, i), "1", "PX", &lease]);
    let rw = |mode: &str, fields: &[(&str, &str)]| {
        let mut h = cmd(&["HSET", NAME, "mode", mode]);
        for (f, v) in fields {
            h.extend([f.to_string(), v.to_string()]);
        }
        vec![h, cmd(&["PEXPIRE", NAME, &lease])]
    };
    match state {
        Free => vec![],
        Reentrant(h) | Fair(h) => held(h.id(), "1"),
        ReentrantTwice(h) => held(h.id(), "2"),
        ReentrantForever(h) => vec![cmd(&["HSET", NAME, h.id(), "1"])],
        ReentrantMax(h) => held(h.id(), MAX),
        ReadMax(h) => [rw("read", &[(h.id(), MAX)]), vec![read_hold(h.id(), 1)]].concat(),
        WriteMax(h) => rw("write", &[(&format!("{}:write", h.id()), MAX)]),
        Fenced(h) => [held(h.id(), "1"), vec![cmd(&["SET", &names::token(NAME), "41"])]].concat(),
        FairQueued(h) => [held(h.id(), "1"), queued(WAITER, now + 40_000)].concat(),
        FairQueuedExpired(h) => [held(h.id(), "1"), queued(WAITER, now - 5_000)].concat(),
        FairFreeQueued => queued(WAITER, now + 40_000),
        FairFreeMeQueued => queued(ME, now + 40_000),
        Write(h) => rw("write", &[(&format!("{}:write", h.id()), "1")]),
        WriteForever(h) => vec![cmd(&["HSET", NAME, "mode", "write", &format!("{}:write", h.id()), "1"])],
        Read(h) => [rw("read", &[(h.id(), "1")]), vec![read_hold(h.id(), 1)]].concat(),
        ReadSeveral(h) => {
            let other = if h == Holder::Me { THEM } else { ME };
            let holds = vec![read_hold(h.id(), 1), read_hold(h.id(), 2), read_hold(other, 1)];
            [rw("read", &[(h.id(), "2"), (other, "1")]), holds].concat()
        }
        ReadExpired(h) => rw("read", &[(h.id(), "1")]),
        WriteThenRead(h) => {
            let fields = [(format!("{}:write", h.id()), "1"), (h.id().to_string(), "1")];
            let fields: Vec<(&str, &str)> = fields.iter().map(|(f, v)| (f.as_str(), *v)).collect();
            [rw("write", &fields), vec![read_hold(h.id(), 1)]].concat()
        }
        LatchReleased(h) => {
            [held(h.id(), "1"), vec![cmd(&["SET", &names::latch(NAME, REQUEST), "1", "PX", "5000"])]].concat()
        }
        WrongType => vec![cmd(&["SET", NAME, "not-a-lock", "PX", &lease])],
    }
}

/// The family whose own class makes a state, for [`ordinary`].
#[derive(Clone, Copy, PartialEq, Debug)]
enum Makes {
    /// Free: every family's.
    Any,
    Reentrant,
    ReadWrite,
    Fair,
    Nobody,
}

fn makes(state: State) -> Makes {
    use State::*;
    match state {
        Free => Makes::Any,
        Reentrant(_) | ReentrantTwice(_) | Fenced(_) | LatchReleased(_) => Makes::Reentrant,
        Fair(_) | FairQueued(_) | FairQueuedExpired(_) | FairFreeQueued | FairFreeMeQueued => Makes::Fair,
        Write(_) | Read(_) | ReadSeveral(_) | ReadExpired(_) | WriteThenRead(_) => Makes::ReadWrite,
        ReentrantForever(_) | WriteForever(_) | ReentrantMax(_) | ReadMax(_) | WriteMax(_) | WrongType => Makes::Nobody,
    }
}

/// Which family's lock a body works on (the renewals: see [`ordinary`]).
fn serves(r: Role) -> Makes {
    use Role::*;
    match r {
        Acquire | FencedToken | FencedNil | Unlock { .. } | Force { .. } | Renew | RenewTask => Makes::Reentrant,
        FairAcquire | FairTry | FairUnlock { .. } | FairForce { .. } | FairCancel => Makes::Fair,
        _ => Makes::ReadWrite,
    }
}

/// Ordinary use: a body of a lock class on the states that class makes (or a free lock). Such
/// calls must all run natively; the rest may be left to Lua. The reentrant renewal serves the
/// reentrant and fair locks, and the write lock by `owner:write`.
fn ordinary(r: Role, state: State, by_writer: bool) -> bool {
    let m = makes(state);
    match r {
        Role::IsLocked => false,
        Role::Renew | Role::RenewTask if by_writer => writes(state) || m == Makes::Any,
        Role::Renew | Role::RenewTask => matches!(m, Makes::Any | Makes::Reentrant | Makes::Fair),
        _ => m == Makes::Any || serves(r) == m,
    }
}

/// The owners a body is called by: the write lock's watchdog renews `owner:write` with the
/// reentrant renewal, so the renewals are called for both.
fn callers(r: Role) -> Vec<String> {
    match r {
        Role::Renew | Role::RenewTask => vec![ME.to_string(), format!("{ME}:write")],
        _ => vec![ME.to_string()],
    }
}

fn choices(publish: &str) -> Choices {
    Choices {
        lease: "45000".into(),
        latch_ms: "5000".into(),
        wait: "5000".into(),
        request: REQUEST.into(),
        publish: publish.into(),
        second: None,
    }
}

/// The write lock's states, where the writer's renewal is `owner:write`'s.
fn writes(state: State) -> bool {
    matches!(state, State::Write(_) | State::WriteThenRead(_))
}

#[test]
fn every_redisson_body_answers_as_its_lua_on_every_lock_state() {
    let scripts = Scripts::load();
    let mut pair = ScriptPair::new(&scripts);
    let mut left_to_lua: Vec<String> = Vec::new();
    let mut differences: Vec<String> = Vec::new();
    let mut not_native_in_ordinary_use: Vec<String> = Vec::new();
    let (mut cases, mut native_cases) = (0, 0);
    for body in &scripts.bodies {
        let r = role(&body.sha);
        for state in states() {
            // A body that loops over hold counts would spin for ever in Lua on a count near
            // 2^63 (and so would the module's fallback to it): those pairs are not run.
            let huge = matches!(state, State::ReentrantMax(_) | State::ReadMax(_) | State::WriteMax(_));
            if huge && body.text.contains("for ") {
                continue;
            }
            for owner in callers(r) {
                // A renewal by `owner:write` is the write lock's: ordinary only on its states.
                let by_writer = owner.ends_with(":write");
                // Lower case only where the body takes the publish command as an argument.
                for publish in ["PUBLISH", "publish"] {
                    if publish == "publish" && !takes_publish(r) {
                        continue;
                    }
                    pair.flush();
                    for c in setup(state, now_ms()) {
                        pair.step(&c, false, false);
                    }
                    pair.check();
                    let c = call(&body.sha, r, NAME, &owner, &choices(publish));
                    let before = field(&mut pair.nc, "redisson_native_total");
                    let causes_before = causes(&mut pair.nc);
                    let (lua, nat, same) = pair.eval_both(&c.sha, &c.keys, &c.argv, c.ttl);
                    let keyspace = pair.difference();
                    let native = field(&mut pair.nc, "redisson_native_total") > before;
                    cases += 1;
                    native_cases += usize::from(native);
                    let what = format!("{} {:?} on {state:?} by {owner} ({publish})", &body.sha[..8], r);
                    if !same {
                        differences.push(format!("{what}: lua {lua:?}, native {nat:?}"));
                    } else if let Some(d) = keyspace {
                        differences.push(format!("{what}: {d}"));
                    }
                    if !native {
                        // Counted once, under the cause that sent it to Lua.
                        let after = causes(&mut pair.nc);
                        let moved: Vec<&str> = CAUSES
                            .iter()
                            .zip(after.iter().zip(&causes_before))
                            .filter(|(_, (a, b))| a > b)
                            .map(|(c, _)| *c)
                            .collect();
                        assert_eq!(moved.len(), 1, "{what}: causes counted {moved:?}");
                        left_to_lua.push(format!("{what}: {}", moved[0]));
                    }
                    // 3.44-3.52's read renewal reuses its loop index: a hold count of 2 ends
                    // in a Lua error, which only running the Lua gives.
                    let lua_error = body.sha.starts_with("1affef78") && matches!(state, State::ReadSeveral(_));
                    if ordinary(r, state, by_writer) && !native && !lua_error {
                        not_native_in_ordinary_use.push(what);
                    }
                }
            }
        }
    }
    eprintln!("{cases} calls, {native_cases} ran natively; left to Lua:");
    for w in &left_to_lua {
        eprintln!("  {w}");
    }
    assert!(cases > 1_000, "{cases} calls");
    assert!(
        differences.is_empty(),
        "{} calls answered unlike the Lua:\n  {}",
        differences.len(),
        differences.join("\n  ")
    );
    assert!(
        not_native_in_ordinary_use.is_empty(),
        "calls of ordinary use left to Lua:\n  {}",
        not_native_in_ordinary_use.join("\n  ")
    );
}

/// Whether a body takes its publish command as an argument (Redisson 3.22 and later).
fn takes_publish(r: Role) -> bool {
    use Role::*;
    matches!(
        r,
        Unlock { pubarg: true, .. }
            | Force { pubarg: true }
            | UnlockRead { pubarg: true, .. }
            | UnlockWrite { pubarg: true, .. }
            | ForceRead { pubarg: true }
            | ForceWrite { pubarg: true }
            | FairUnlock { pubarg: true, .. }
            | FairForce { pubarg: true }
    )
}
