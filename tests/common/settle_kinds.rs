//! The kinds of parked acquire for `tests/grants/grant_settle.rs`: how each one is held, waited for
//! by two parked clients (`w`, whose grant is dropped, and `x`, next in line), released, and read
//! back, with the lines its reads give in each state.

use super::names::*;
use super::{ok, Value};

/// One kind of parked acquire, on the key it is given.
pub struct Kind {
    pub name: &'static str,
    /// Makes the resource unavailable (as `holder`); returns the holder's release.
    pub hold: fn(&mut redis::Connection, &str) -> Vec<String>,
    /// The acquires of `w` and `x` (`BLOCK 0` is added).
    pub acquire_w: fn(&str) -> Vec<String>,
    pub acquire_x: fn(&str) -> Vec<String>,
    /// Whether an answer is the grant.
    pub granted: fn(&Value) -> bool,
    /// What `w` and `x` send to release what their grant replies say they hold.
    pub release_w: fn(&str, &Value) -> Vec<String>,
    pub release_x: fn(&str, &Value) -> Vec<String>,
    /// Reads saying what `w` holds, by the module's own commands (`*.HOLDS`, the parked
    /// clients of `SYNC.INFO`) and the keyspace.
    pub reads: fn(&str) -> Vec<Vec<String>>,
    /// The reads' replies as one comparable line.
    pub line: fn(&[Value]) -> String,
    /// `line` with `w` holding its grant (and `x` parked), with `x` holding its grant (`w`'s
    /// given back), and with nothing held.
    pub w_holds: &'static str,
    pub x_holds: &'static str,
    pub free: &'static str,
    /// What the holder's release, `w`'s give-back (or its own release) and `x`'s release
    /// publish.
    pub on_release: fn(&str) -> Vec<(String, String)>,
    pub on_give_back: fn(&str) -> Vec<(String, String)>,
    pub on_x_release: fn(&str) -> Vec<(String, String)>,
    /// A grant takes something (a latch's wait does not: nothing goes back).
    pub takes: bool,
}

pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// A reply, compactly: `1`, `nil`, `[mode read w 1]`.
pub fn show(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Int(n) => n.to_string(),
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(" ")),
        other => format!("{other:?}"),
    }
}

/// `parked_total` of a `SYNC.INFO` reply (RESP2: a flat array of fields and values).
fn parked(v: &Value) -> String {
    let Value::Array(a) = v else { return format!("not a map: {v:?}") };
    a.chunks(2)
        .find(|kv| show(&kv[0]) == "parked_total")
        .and_then(|kv| kv.get(1))
        .map_or_else(|| "no parked_total".into(), show)
}

fn line_all(v: &[Value]) -> String {
    v.iter().map(show).collect::<Vec<_>>().join(" ")
}

/// Every reply but the last shown, the last one a `SYNC.INFO` read for its parked count.
fn line_parked(v: &[Value]) -> String {
    let (info, rest) = v.split_last().expect("reads");
    format!("{} {}", line_all(rest), parked(info))
}

fn sem_channel(k: &str) -> String {
    prefix("redisson_sc", k)
}

fn none(_: &str) -> Vec<(String, String)> {
    Vec::new()
}

fn lock_msg(k: &str) -> Vec<(String, String)> {
    vec![(lock_channel(k), "0".into())]
}

fn sem_msg(k: &str) -> Vec<(String, String)> {
    vec![(sem_channel(k), "1".into())]
}

fn lock_kind(fenced: bool) -> Kind {
    Kind {
        name: if fenced { "fenced" } else { "lock" },
        hold: |c, k| {
            ok(c, &["LOCK.ACQUIRE", k, "holder", "60000"]);
            strs(&["LOCK.UNLOCK", k, "holder", "60000"])
        },
        acquire_w: if fenced {
            |k| strs(&["LOCK.ACQUIRE", k, "w", "60000", "TOKEN"])
        } else {
            |k| strs(&["LOCK.ACQUIRE", k, "w", "60000"])
        },
        acquire_x: if fenced {
            |k| strs(&["LOCK.ACQUIRE", k, "x", "60000", "TOKEN"])
        } else {
            |k| strs(&["LOCK.ACQUIRE", k, "x", "60000"])
        },
        granted: if fenced {
            |v| matches!(v, Value::Array(a) if a.first() == Some(&Value::Int(-1)))
        } else {
            |v| *v == Value::Nil
        },
        release_w: |k, _| strs(&["LOCK.UNLOCK", k, "w", "60000"]),
        release_x: |k, _| strs(&["LOCK.UNLOCK", k, "x", "60000"]),
        reads: |k| vec![strs(&["LOCK.HOLDS", k, "w"]), strs(&["HGETALL", k])],
        line: line_all,
        w_holds: "1 [w 1]",
        x_holds: "0 [x 1]",
        free: "0 []",
        on_release: lock_msg,
        on_give_back: lock_msg,
        on_x_release: lock_msg,
        takes: true,
    }
}

/// Every kind of parked acquire.
pub fn kinds() -> Vec<Kind> {
    vec![
        lock_kind(false),
        lock_kind(true),
        // A reader granted, a writer next: the reader's give-back lets the writer in.
        Kind {
            name: "read",
            hold: |c, k| {
                ok(c, &["RWLOCK.WLOCK", k, "holder", "60000"]);
                strs(&["RWLOCK.UNLOCK", k, "holder", "WRITE", "60000"])
            },
            acquire_w: |k| strs(&["RWLOCK.RLOCK", k, "w", "60000"]),
            acquire_x: |k| strs(&["RWLOCK.WLOCK", k, "x", "60000"]),
            granted: |v| *v == Value::Nil,
            release_w: |k, _| strs(&["RWLOCK.UNLOCK", k, "w", "READ", "60000"]),
            release_x: |k, _| strs(&["RWLOCK.UNLOCK", k, "x", "WRITE", "60000"]),
            reads: |k| {
                vec![
                    strs(&["RWLOCK.HOLDS", k, "w"]),
                    strs(&["HGETALL", k]),
                    strs(&["EXISTS", &read_timeout(k, "w", 1)]),
                ]
            },
            line: line_all,
            w_holds: "[1 0] [mode read w 1] 1",
            x_holds: "[0 0] [mode write x:write 1] 0",
            free: "[0 0] [] 0",
            on_release: |k| vec![(rwlock_channel(k), "1".into())],
            on_give_back: |k| vec![(rwlock_channel(k), "0".into())],
            on_x_release: |k| vec![(rwlock_channel(k), "1".into())],
            takes: true,
        },
        // A writer granted, a reader next (parked behind it).
        Kind {
            name: "write",
            hold: |c, k| {
                ok(c, &["RWLOCK.RLOCK", k, "holder", "60000"]);
                strs(&["RWLOCK.UNLOCK", k, "holder", "READ", "60000"])
            },
            acquire_w: |k| strs(&["RWLOCK.WLOCK", k, "w", "60000"]),
            acquire_x: |k| strs(&["RWLOCK.RLOCK", k, "x", "60000"]),
            granted: |v| *v == Value::Nil,
            release_w: |k, _| strs(&["RWLOCK.UNLOCK", k, "w", "WRITE", "60000"]),
            release_x: |k, _| strs(&["RWLOCK.UNLOCK", k, "x", "READ", "60000"]),
            reads: |k| vec![strs(&["RWLOCK.HOLDS", k, "w"]), strs(&["HGETALL", k])],
            line: line_all,
            w_holds: "[0 1] [mode write w:write 1]",
            x_holds: "[0 0] [mode read x 1]",
            free: "[0 0] []",
            on_release: |k| vec![(rwlock_channel(k), "0".into())],
            on_give_back: |k| vec![(rwlock_channel(k), "1".into())],
            on_x_release: |k| vec![(rwlock_channel(k), "0".into())],
            takes: true,
        },
        Kind {
            name: "fair",
            hold: |c, k| {
                ok(c, &["FAIRLOCK.ACQUIRE", k, "holder", "60000", "60000"]);
                strs(&["FAIRLOCK.UNLOCK", k, "holder", "60000"])
            },
            acquire_w: |k| strs(&["FAIRLOCK.ACQUIRE", k, "w", "60000", "60000"]),
            acquire_x: |k| strs(&["FAIRLOCK.ACQUIRE", k, "x", "60000", "60000"]),
            granted: |v| *v == Value::Nil,
            release_w: |k, _| strs(&["FAIRLOCK.UNLOCK", k, "w", "60000"]),
            release_x: |k, _| strs(&["FAIRLOCK.UNLOCK", k, "x", "60000"]),
            reads: |k| {
                vec![
                    strs(&["FAIRLOCK.HOLDS", k, "w"]),
                    strs(&["HGETALL", k]),
                    strs(&["LRANGE", &fair_queue(k), "0", "-1"]),
                ]
            },
            line: line_all,
            w_holds: "1 [w 1] [x]",
            x_holds: "0 [x 1] []",
            free: "0 [] []",
            // Each unlock publishes to the waiter then first in the queue.
            on_release: |k| vec![(fair_waiter_channel(k, "w"), "0".into())],
            on_give_back: |k| vec![(fair_waiter_channel(k, "x"), "0".into())],
            on_x_release: none,
            takes: true,
        },
        Kind {
            name: "semaphore",
            hold: |c, k| {
                ok(c, &["SET", k, "0"]);
                strs(&["SEMAPHORE.RELEASE", k, "1"])
            },
            acquire_w: |k| strs(&["SEMAPHORE.ACQUIRE", k, "1"]),
            acquire_x: |k| strs(&["SEMAPHORE.ACQUIRE", k, "1"]),
            granted: |v| *v == Value::Int(1),
            release_w: |k, _| strs(&["SEMAPHORE.RELEASE", k, "1"]),
            release_x: |k, _| strs(&["SEMAPHORE.RELEASE", k, "1"]),
            reads: |k| vec![strs(&["SEMAPHORE.AVAILABLE", k]), strs(&["SYNC.INFO", k])],
            line: line_parked,
            w_holds: "0 1",
            x_holds: "0 0",
            free: "1 0",
            on_release: sem_msg,
            on_give_back: sem_msg,
            on_x_release: sem_msg,
            takes: true,
        },
        Kind {
            name: "psemaphore",
            hold: |c, k| {
                ok(c, &["PSEMAPHORE.TRYSETPERMITS", k, "1"]);
                let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg(k).arg(1).arg(60000).query(c).expect("ids");
                strs(&["PSEMAPHORE.RELEASE", k, &ids[0]])
            },
            acquire_w: |k| strs(&["PSEMAPHORE.ACQUIRE", k, "1", "60000"]),
            acquire_x: |k| strs(&["PSEMAPHORE.ACQUIRE", k, "1", "60000"]),
            granted: |v| matches!(v, Value::Array(ids) if ids.len() == 1),
            release_w: |k, v| strs(&["PSEMAPHORE.RELEASE", k, show(v).trim_matches(['[', ']'])]),
            release_x: |k, v| strs(&["PSEMAPHORE.RELEASE", k, show(v).trim_matches(['[', ']'])]),
            reads: |k| {
                vec![
                    strs(&["PSEMAPHORE.AVAILABLE", k]),
                    strs(&["ZCARD", &suffix(k, "timeout")]),
                    strs(&["SYNC.INFO", k]),
                ]
            },
            line: line_parked,
            w_holds: "0 1 1",
            x_holds: "0 1 0",
            free: "1 0 0",
            on_release: sem_msg,
            on_give_back: sem_msg,
            on_x_release: sem_msg,
            takes: true,
        },
        // One permit a minute: the holder's grant took it; a release credits it back.
        Kind {
            name: "ratelimiter",
            hold: |c, k| {
                ok(c, &["RATELIMITER.TRYSETRATE", k, "OVERALL", "1", "60000"]);
                assert_eq!(ok(c, &["RATELIMITER.ACQUIRE", k, "1"]), Value::Nil, "the holder's grant");
                strs(&["RATELIMITER.RELEASE", k, "1"])
            },
            acquire_w: |k| strs(&["RATELIMITER.ACQUIRE", k, "1"]),
            acquire_x: |k| strs(&["RATELIMITER.ACQUIRE", k, "1"]),
            granted: |v| *v == Value::Nil,
            release_w: |k, _| strs(&["RATELIMITER.RELEASE", k, "1"]),
            release_x: |k, _| strs(&["RATELIMITER.RELEASE", k, "1"]),
            reads: |k| vec![strs(&["RATELIMITER.AVAILABLE", k]), strs(&["SYNC.INFO", k])],
            line: line_parked,
            w_holds: "0 1",
            x_holds: "0 0",
            free: "1 0",
            on_release: none,
            on_give_back: none,
            on_x_release: none,
            takes: true,
        },
        // Both waits open together, and take nothing: nothing goes back.
        Kind {
            name: "latch",
            hold: |c, k| {
                ok(c, &["COUNTDOWN.TRYSETCOUNT", k, "1"]);
                strs(&["COUNTDOWN.DECR", k])
            },
            acquire_w: |k| strs(&["COUNTDOWN.AWAIT", k]),
            acquire_x: |k| strs(&["COUNTDOWN.AWAIT", k]),
            granted: |v| *v == Value::Int(1),
            release_w: |_, _| strs(&["PING"]),
            release_x: |_, _| strs(&["PING"]),
            reads: |k| vec![strs(&["COUNTDOWN.COUNT", k]), strs(&["SYNC.INFO", k])],
            line: line_parked,
            w_holds: "0 0",
            x_holds: "0 0",
            free: "0 0",
            on_release: |k| vec![(format!("redisson_countdownlatch__channel__{{{k}}}"), "0".into())],
            on_give_back: none,
            on_x_release: none,
            takes: false,
        },
    ]
}

/// The kind named `name`.
pub fn kind(name: &str) -> Kind {
    kinds().into_iter().find(|k| k.name == name).unwrap_or_else(|| panic!("no kind {name}"))
}
