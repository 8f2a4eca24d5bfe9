//! A grant racing the waiter's unblock (issue 29, defect 1): a parked client is granted, and
//! before Redis writes the reply it is unblocked (`CLIENT UNBLOCK ... ERROR|TIMEOUT`, in a
//! transaction or a pipeline right behind the release), killed, or its BLOCK time runs out.
//! Whatever it is told, it holds exactly that: told granted, it holds the grant; told an
//! error, or gone, it holds nothing and the grant is given back as its release would (the
//! same message published, the lock's next waiter served, a replica equal). Every acquire gets
//! exactly one reply (`Pinged` sends a PING behind it). One test per kind of parked acquire.

use crate::common;

use std::time::Duration;

use common::answers::{Answer, Pinged};
use common::names::*;
use common::parked::{lockmod_field, wait_blocked};
use common::*;

/// How the waiter is unblocked while its grant is on its way.
#[derive(Clone, Copy, Debug)]
enum How {
    /// `MULTI`, release, `CLIENT UNBLOCK w ERROR`, `EXEC`.
    MultiError,
    /// The same two as a pipeline.
    PipeError,
    /// `MULTI`, release, `CLIENT UNBLOCK w TIMEOUT`, `EXEC`: what the client libraries send.
    MultiTimeout,
    PipeTimeout,
    /// Release, `CLIENT KILL ID w`.
    Kill,
    /// The waiter's BLOCK time runs out while the server runs `DEBUG SLEEP` and the release.
    TimeRunsOut,
}

const ALL: [How; 6] =
    [How::MultiError, How::PipeError, How::MultiTimeout, How::PipeTimeout, How::Kill, How::TimeRunsOut];

/// One kind of parked acquire, on the key it is given.
struct Kind {
    /// Makes the resource unavailable (as `holder`); returns the holder's release.
    hold: fn(&mut redis::Connection, &str) -> Vec<String>,
    /// The waiter's acquire (BLOCK is added).
    acquire: fn(&str) -> Vec<String>,
    /// Whether an answer is the grant.
    granted: fn(&Value) -> bool,
    /// The waiter's release of what its grant reply says it holds.
    release: fn(&str, &Value) -> Vec<String>,
    /// What the keyspace says the waiter holds, as a comparable line.
    state: fn(&mut redis::Connection, &str) -> String,
    /// `state` with the waiter holding its grant, and with nobody holding anything.
    held: &'static str,
    free: &'static str,
    /// What the holder's release publishes, and what a give-back publishes.
    on_release: fn(&str) -> Vec<(String, String)>,
    on_give_back: fn(&str) -> Vec<(String, String)>,
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn run(c: &mut redis::Connection, args: &[String]) -> Value {
    ok(c, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Waits until `state` reads `want` (a give-back runs from a 0 ms timer), or panics.
fn wait_state(kind: &Kind, c: &mut redis::Connection, key: &str, want: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = (kind.state)(c, key);
        if now == want {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{key}: state {now}, wanted {want}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One race on `key`: the waiter parks, is granted and unblocked `how`. Returns false if the
/// race was missed (`TimeRunsOut` only: the time ran out before the release came).
fn race(s: &Server, sub: &Subscriber, kind: &Kind, key: &str, how: How) -> bool {
    let mut c = s.conn();
    let release = (kind.hold)(&mut c, key);
    let mut w = Pinged::connect(s);
    let block = if matches!(how, How::TimeRunsOut) { "300" } else { "0" };
    let mut acquire = (kind.acquire)(key);
    acquire.extend(strs(&["BLOCK", block]));
    w.send(&acquire.iter().map(String::as_str).collect::<Vec<_>>());
    wait_blocked(&mut c, 1);
    sub.take();
    let given_back = lockmod_field(&mut c, "grants_given_back");
    let id = w.id.to_string();
    let unblock = |mode: &str| strs(&["CLIENT", "UNBLOCK", &id, mode]);
    let steps: Vec<Vec<String>> = match how {
        How::MultiError | How::PipeError => vec![release, unblock("ERROR")],
        How::MultiTimeout | How::PipeTimeout => vec![release, unblock("TIMEOUT")],
        How::Kill => vec![release, strs(&["CLIENT", "KILL", "ID", &id])],
        // The sleep outlasts the BLOCK time: the release runs after it ran out, before Redis
        // looks at timeouts again.
        How::TimeRunsOut => vec![strs(&["DEBUG", "SLEEP", "0.4"]), release],
    };
    let mut p = redis::pipe();
    if matches!(how, How::MultiError | How::MultiTimeout) {
        p.atomic();
    }
    for step in &steps {
        p.cmd(&step[0]).arg(&step[1..]);
    }
    let _: Value = p.query(&mut c).expect("the releaser's pipeline");
    let answer = w.answer();
    let mut published = (kind.on_release)(key);
    match (&answer, how) {
        (Answer::Reply(v), How::TimeRunsOut) if !(kind.granted)(v) => {
            wait_state(kind, &mut c, key, kind.free);
            return false;
        }
        (Answer::Reply(v), How::MultiTimeout | How::PipeTimeout | How::TimeRunsOut) if (kind.granted)(v) => {
            // Told granted: it holds the grant, nothing was given back.
            assert_eq!((kind.state)(&mut c, key), kind.held, "{key}: told granted {v:?}");
            assert_eq!(sub.take(), published, "{key}");
            assert_eq!(lockmod_field(&mut c, "grants_given_back"), given_back);
            let mut w2 = s.conn();
            run(&mut w2, &(kind.release)(key, v));
        }
        (Answer::Error(e), How::MultiError | How::PipeError) if e.starts_with("UNBLOCKED") => {}
        (Answer::Gone, How::Kill) => {}
        (other, how) => panic!("{key}: {how:?} answered {other:?}"),
    }
    wait_state(kind, &mut c, key, kind.free);
    if !matches!(answer, Answer::Reply(_)) {
        // Told an error, or gone: the grant was given back as its release would.
        let back = (kind.on_give_back)(key);
        // (A latch's wait took nothing, so nothing goes back.)
        assert_eq!(lockmod_field(&mut c, "grants_given_back"), given_back + i64::from(kind.held != kind.free));
        published.extend(back);
        assert_eq!(sub.take(), published, "{key}: {how:?}");
    }
    true
}

/// Every race for `kind`, on fresh keys, then the replica compared with the primary.
fn every_race(kind: Kind, name: &str) {
    let s = Server::start();
    let r = s.replica();
    let sub = s.subscriber();
    for how in ALL {
        let mut hit = false;
        for attempt in 0..5 {
            if race(&s, &sub, &kind, &format!("{name}-{how:?}-{attempt}"), how) {
                hit = true;
                break;
            }
        }
        assert!(hit, "{how:?}: the BLOCK time never ran out together with the release");
    }
    let mut c = s.conn();
    // The last writes were other connections' and the module's own (a give-back runs from a
    // timer).
    wait_replica_for_all(&mut c);
    let before = diff::dump(&mut c);
    assert_eq!(before, diff::dump(&mut r.conn()), "the replica differs");
    common::fenced::reload_changes_only_the_era(&mut c, &before);
}

fn lock_state(c: &mut redis::Connection, key: &str) -> String {
    format!("{:?}", hgetall(c, key))
}

fn is_nil(v: &Value) -> bool {
    *v == Value::Nil
}

fn lock_kind(fenced: bool) -> Kind {
    Kind {
        hold: |c, k| {
            ok(c, &["LOCK.ACQUIRE", k, "holder", "60000"]);
            strs(&["LOCK.UNLOCK", k, "holder", "60000"])
        },
        acquire: if fenced {
            |k| strs(&["LOCK.ACQUIRE", k, "w", "60000", "TOKEN"])
        } else {
            |k| strs(&["LOCK.ACQUIRE", k, "w", "60000"])
        },
        granted: if fenced { |v| matches!(v, Value::Array(a) if a.first() == Some(&Value::Int(-1))) } else { is_nil },
        release: |k, _| strs(&["LOCK.UNLOCK", k, "w", "60000"]),
        state: lock_state,
        held: r#"{"w": "1"}"#,
        free: "{}",
        on_release: |k| msgs(&[(&lock_channel(k), "0")]),
        on_give_back: |k| msgs(&[(&lock_channel(k), "0")]),
    }
}

#[test]
fn a_reentrant_lock_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(lock_kind(false), "lock");
}

#[test]
fn a_fenced_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(lock_kind(true), "fenced");
}

#[test]
fn a_read_lock_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["RWLOCK.WLOCK", k, "holder", "60000"]);
                strs(&["RWLOCK.UNLOCK", k, "holder", "WRITE", "60000"])
            },
            acquire: |k| strs(&["RWLOCK.RLOCK", k, "w", "60000"]),
            granted: is_nil,
            release: |k, _| strs(&["RWLOCK.UNLOCK", k, "w", "READ", "60000"]),
            // The read hold's timeout key too.
            state: |c, k| {
                format!("{} {}", lock_state(c, k), keys(c).iter().filter(|n| n.contains("rwlock_timeout")).count())
            },
            held: r#"{"mode": "read", "w": "1"} 1"#,
            free: "{} 0",
            on_release: |k| msgs(&[(&rwlock_channel(k), "1")]),
            on_give_back: |k| msgs(&[(&rwlock_channel(k), "0")]),
        },
        "read",
    );
}

#[test]
fn a_write_lock_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["RWLOCK.RLOCK", k, "holder", "60000"]);
                strs(&["RWLOCK.UNLOCK", k, "holder", "READ", "60000"])
            },
            acquire: |k| strs(&["RWLOCK.WLOCK", k, "w", "60000"]),
            granted: is_nil,
            release: |k, _| strs(&["RWLOCK.UNLOCK", k, "w", "WRITE", "60000"]),
            state: lock_state,
            held: r#"{"mode": "write", "w:write": "1"}"#,
            free: "{}",
            on_release: |k| msgs(&[(&rwlock_channel(k), "0")]),
            on_give_back: |k| msgs(&[(&rwlock_channel(k), "1")]),
        },
        "write",
    );
}

#[test]
fn a_fair_lock_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["FAIRLOCK.ACQUIRE", k, "holder", "60000", "60000"]);
                strs(&["FAIRLOCK.UNLOCK", k, "holder", "60000"])
            },
            acquire: |k| strs(&["FAIRLOCK.ACQUIRE", k, "w", "60000", "60000"]),
            granted: is_nil,
            release: |k, _| strs(&["FAIRLOCK.UNLOCK", k, "w", "60000"]),
            // The queue and its deadlines too: the grant took the waiter out of both.
            state: |c, k| format!("{} {:?}", lock_state(c, k), keys(c).iter().filter(|n| n.contains(k)).count()),
            held: r#"{"w": "1"} 1"#,
            free: "{} 0",
            on_release: |k| msgs(&[(&fair_waiter_channel(k, "w"), "0")]),
            // Nobody queued behind: a fair unlock then publishes nothing.
            on_give_back: |_| Vec::new(),
        },
        "fair",
    );
}

fn sem_channel(k: &str) -> String {
    prefix("redisson_sc", k)
}

#[test]
fn a_semaphore_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["SET", k, "0"]);
                strs(&["SEMAPHORE.RELEASE", k, "1"])
            },
            acquire: |k| strs(&["SEMAPHORE.ACQUIRE", k, "1"]),
            granted: |v| *v == Value::Int(1),
            release: |k, _| strs(&["SEMAPHORE.RELEASE", k, "1"]),
            state: |c, k| format!("{:?}", ok(c, &["SEMAPHORE.AVAILABLE", k])),
            held: "int(0)",
            free: "int(1)",
            on_release: |k| msgs(&[(&sem_channel(k), "1")]),
            on_give_back: |k| msgs(&[(&sem_channel(k), "1")]),
        },
        "sem",
    );
}

#[test]
fn an_expirable_semaphore_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["PSEMAPHORE.TRYSETPERMITS", k, "1"]);
                let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg(k).arg(1).arg(60000).query(c).expect("ids");
                strs(&["PSEMAPHORE.RELEASE", k, &ids[0]])
            },
            acquire: |k| strs(&["PSEMAPHORE.ACQUIRE", k, "1", "60000"]),
            granted: |v| matches!(v, Value::Array(ids) if ids.len() == 1),
            release: |k, v| {
                let ids: Vec<String> = redis::from_redis_value(v).expect("ids");
                strs(&["PSEMAPHORE.RELEASE", k, &ids[0]])
            },
            // Available, and the leases held.
            state: |c, k| {
                let z: i64 = redis::cmd("ZCARD").arg(suffix(k, "timeout")).query(c).expect("ZCARD");
                format!("{:?} {z}", ok(c, &["PSEMAPHORE.AVAILABLE", k]))
            },
            held: "int(0) 1",
            free: "int(1) 0",
            on_release: |k| msgs(&[(&sem_channel(k), "1")]),
            on_give_back: |k| msgs(&[(&sem_channel(k), "1")]),
        },
        "psem",
    );
}

/// A rate limiter of 1 permit per minute: the holder's grant took it, its release
/// (`RATELIMITER.RELEASE`, Redisson's `release()`) credits it back and serves the waiter. A
/// grant given back is a release of the waiter's permits (no message: Redisson's limiter
/// publishes none).
#[test]
fn a_rate_limiter_grant_racing_the_unblock_is_held_or_given_back() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["RATELIMITER.TRYSETRATE", k, "OVERALL", "1", "60000"]);
                assert_eq!(ok(c, &["RATELIMITER.ACQUIRE", k, "1"]), Value::Nil, "the holder's grant");
                strs(&["RATELIMITER.RELEASE", k, "1"])
            },
            acquire: |k| strs(&["RATELIMITER.ACQUIRE", k, "1"]),
            // Granted is nil; a wait that ran out replies the ms still to wait.
            granted: |v| *v == Value::Nil,
            release: |k, _| strs(&["RATELIMITER.RELEASE", k, "1"]),
            state: |c, k| format!("{:?}", ok(c, &["RATELIMITER.AVAILABLE", k])),
            held: "int(0)",
            free: "int(1)",
            on_release: |_| Vec::new(),
            on_give_back: |_| Vec::new(),
        },
        "rate",
    );
}

#[test]
fn a_latch_opening_as_its_waiter_is_unblocked_answers_it_exactly_once() {
    every_race(
        Kind {
            hold: |c, k| {
                ok(c, &["COUNTDOWN.TRYSETCOUNT", k, "1"]);
                strs(&["COUNTDOWN.DECR", k])
            },
            acquire: |k| strs(&["COUNTDOWN.AWAIT", k]),
            granted: |v| *v == Value::Int(1),
            // A latch's wait takes nothing.
            release: |_, _| strs(&["PING"]),
            state: |c, k| format!("{:?}", ok(c, &["COUNTDOWN.COUNT", k])),
            held: "int(0)",
            free: "int(0)",
            on_release: |k| msgs(&[(&format!("redisson_countdownlatch__channel__{{{k}}}"), "0")]),
            on_give_back: |_| Vec::new(),
        },
        "latch",
    );
}

#[test]
fn a_grant_is_given_back_only_once_paused_writes_resume() {
    let s = Server::start();
    let r = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["SET", "s", "0"]);
    let mut w = Pinged::connect(&s);
    w.send(&["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let id = w.id.to_string();
    let _: Value = redis::pipe()
        .atomic()
        .cmd("SEMAPHORE.RELEASE")
        .arg("s")
        .arg(1)
        .cmd("CLIENT")
        .arg(&["PAUSE", "60000", "WRITE"])
        .cmd("CLIENT")
        .arg(&["UNBLOCK", &id, "ERROR"])
        .query(&mut c)
        .expect("EXEC");
    assert!(matches!(w.answer(), Answer::Error(e) if e.starts_with("UNBLOCKED")));
    // Dropped while writes are paused: the give-back waits for them to resume (the module
    // polls for the pause's end every few ms).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ok(&mut c, &["SEMAPHORE.AVAILABLE", "s"]), Value::Int(0), "written during the pause");
    assert_eq!(lockmod_field(&mut c, "grants_given_back"), 0);
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    let kind = Kind {
        hold: |_, _| Vec::new(),
        acquire: |_| Vec::new(),
        granted: is_nil,
        release: |_, _| Vec::new(),
        state: |c, k| format!("{:?}", ok(c, &["SEMAPHORE.AVAILABLE", k])),
        held: "int(0)",
        free: "int(1)",
        on_release: |_| Vec::new(),
        on_give_back: |_| Vec::new(),
    };
    wait_state(&kind, &mut c, "s", kind.free);
    assert_eq!(lockmod_field(&mut c, "grants_given_back"), 1);
    wait_replica(&mut c);
    assert_eq!(redis::cmd("GET").arg("s").query::<Option<String>>(&mut r.conn()).ok().flatten().as_deref(), Some("1"));
}
