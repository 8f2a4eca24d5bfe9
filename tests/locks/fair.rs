//! FAIRLOCK.* against a real redis-server: every branch, with the reply, the keyspace (the lock
//! hash, the queue list and the deadline zset) and what each waiter's own channel receives.

use crate::common;

use std::thread::sleep;
use std::time::Duration;

use common::diff::now_ms;
use common::*;

const Q: &str = "redisson_lock_queue:{doc}";
const Z: &str = "redisson_lock_timeout:{doc}";
const WAIT: i64 = 60_000;

fn acquire(c: &mut redis::Connection, owner: &str, lease: &str) -> Value {
    ok(c, &["FAIRLOCK.ACQUIRE", "doc", owner, lease, &WAIT.to_string()])
}

fn queue(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE").arg(Q).arg(0).arg(-1).query(c).expect("LRANGE")
}

/// Deadlines (ms since the epoch), in score order.
fn deadlines(c: &mut redis::Connection) -> Vec<(String, i64)> {
    let z: Vec<(String, f64)> = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    z.into_iter().map(|(m, s)| (m, s as i64)).collect()
}

/// Asserts the waiters' deadlines, each given as ms after `from` (an absolute time, such as
/// the expiry of the lease the first waiter waits for): exact but for a ms of rounding, and
/// however long the test took to ask.
fn assert_deadlines(c: &mut redis::Connection, from: i64, want: &[(&str, i64)]) {
    let got = deadlines(c);
    assert_eq!(
        got.iter().map(|(m, _)| m.as_str()).collect::<Vec<_>>(),
        want.iter().map(|(m, _)| *m).collect::<Vec<_>>()
    );
    for ((m, at), (_, want_at)) in got.iter().zip(want) {
        assert!((at - from - want_at).abs() <= 2, "deadline of {m}: {} ms after {from}, wanted {want_at}", at - from);
    }
}

/// Asserts `owner`'s acquire is refused with the time left until `until` (absolute, ms) when
/// it ran: between that time's distance from just before the call and from just after it.
fn assert_refused_until(c: &mut redis::Connection, owner: &str, until: i64) {
    let before = common::diff::now_ms();
    let ttl = int(&acquire(c, owner, "30000"));
    let after = common::diff::now_ms();
    assert!((until - after - 1..=until - before + 1).contains(&ttl), "{owner}: {ttl}, {before}..{after} to {until}");
}

fn ch(owner: &str) -> String {
    names::fair_waiter_channel("doc", owner)
}

/// Seed 004: t1 holds; t3, then t2, queue behind it; unlocks hand the lock on in that order.
#[test]
fn seed_004_waiters_queue_and_are_served_in_order() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(acquire(&mut c, "t1", "30000"), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("t1", "1")]));
    let t1_ends = pexpiretime(&mut c, "doc");
    assert_refused_until(&mut c, "t3", t1_ends);
    assert_refused_until(&mut c, "t2", t1_ends + WAIT);
    assert_eq!(queue(&mut c), ["t3", "t2"]);
    assert_deadlines(&mut c, t1_ends, &[("t3", WAIT), ("t2", 2 * WAIT)]);
    // t2 retries: it keeps its place and learns the lock's TTL.
    assert_refused_until(&mut c, "t2", t1_ends);
    assert_eq!(queue(&mut c), ["t3", "t2"]);

    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t1", "30000"]), Value::Int(1));
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(&ch("t3"), "0")]), "only the head hears it");
    assert_eq!(acquire(&mut c, "t2", "30000"), Value::Int(0), "not its turn: the free lock's PTTL, at least 0");
    assert_eq!(acquire(&mut c, "t3", "30000"), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("t3", "1")]));
    assert_eq!(queue(&mut c), ["t2"]);
    // t3's grant moved t2 up by the wait it no longer waits behind.
    assert_deadlines(&mut c, t1_ends, &[("t2", WAIT)]);

    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t3", "30000"]), Value::Int(1));
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(&ch("t2"), "0")]));
    assert_eq!(acquire(&mut c, "t2", "30000"), Value::Nil);
    assert_eq!(keys(&mut c), ["doc"], "queue and zset are gone with their last member");
}

#[test]
fn five_waiters_are_granted_in_fifo_order() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "holder", "30000");
    for i in 0..5 {
        acquire(&mut c, &format!("w{i}"), "30000");
    }
    let mut holder = "holder".to_string();
    for i in 0..5 {
        ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", &holder, "30000"]);
        for later in (i + 1)..5 {
            assert_eq!(acquire(&mut c, &format!("w{later}"), "30000"), Value::Int(0), "w{later} must wait for w{i}");
        }
        holder = format!("w{i}");
        assert_eq!(acquire(&mut c, &holder, "30000"), Value::Nil);
        assert_eq!(queue(&mut c).len(), 4 - i);
    }
}

#[test]
fn a_waiter_past_its_deadline_is_purged_and_the_next_is_served() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "t1", "100", "50"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "gone", "100", "50"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "alive", "100", "5000"]);
    assert_eq!(queue(&mut c), ["gone", "alive"]);
    sleep(Duration::from_millis(200));
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "alive", "100", "5000"]), Value::Nil);
    assert_eq!(queue(&mut c), Vec::<String>::new());
}

#[test]
fn cancel_in_the_middle_moves_the_later_waiters_up() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "t1", "30000");
    let t1_ends = pexpiretime(&mut c, "doc");
    for w in ["a", "b", "c"] {
        acquire(&mut c, w, "30000");
    }
    assert_eq!(ok(&mut c, &["FAIRLOCK.CANCEL", "doc", "b", &WAIT.to_string()]), Value::Int(1));
    assert_eq!(queue(&mut c), ["a", "c"]);
    assert_deadlines(&mut c, t1_ends, &[("a", WAIT), ("c", 2 * WAIT)]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.CANCEL", "doc", "b", "100"]), Value::Int(0));
}

#[test]
fn reentry_noqueue_renew_and_partial_unlock() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "t1", "30000");
    let since = now_ms();
    assert_eq!(acquire(&mut c, "t1", "40000"), Value::Nil);
    assert_eq!(hgetall(&mut c, "doc"), map(&[("t1", "2")]));
    assert_lease(&mut c, "doc", 40_000, since);
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "t2", "100", "100", "NOQUEUE"]), Value::Int(1));
    assert_eq!(keys(&mut c), ["doc"], "NOQUEUE leaves no trace");
    let since = now_ms();
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", "doc", "t1", "50000"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", "doc", "t2", "50000"]), Value::Int(0));
    assert_lease(&mut c, "doc", 50_000, since);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t2", "30000"]), Value::Nil);
    let since = now_ms();
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t1", "20000"]), Value::Int(0));
    assert_lease(&mut c, "doc", 20_000, since);
}

#[test]
fn unlocking_a_free_lock_and_force_unlock_notify_the_head() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    acquire(&mut c, "t1", "30000");
    acquire(&mut c, "w", "30000");
    ok(&mut c, &["DEL", "doc"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t1", "30000"]), Value::Int(1));
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(&ch("w"), "0")]));
    assert_eq!(ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "doc"]), Value::Int(0));
    assert_eq!(acquire(&mut c, "w", "30000"), Value::Nil, "first in line");
    acquire(&mut c, "t1", "30000");
    assert_eq!(ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", "doc"]), Value::Int(1));
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[(&ch("t1"), "0")]));
    assert_eq!(queue(&mut c), ["t1"]);
}

#[test]
fn bad_input_is_an_error_that_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "t1", "30000");
    acquire(&mut c, "w", "30000");
    let before = (hgetall(&mut c, "doc"), queue(&mut c), deadlines(&mut c).len());
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["FAIRLOCK.ACQUIRE", "doc", "t", "100"], "ERR wrong number of arguments for 'fairlock.acquire' command"),
        (&["FAIRLOCK.UNLOCK", "doc", "t"], "ERR wrong number of arguments for 'fairlock.unlock' command"),
        (&["FAIRLOCK.CANCEL", "doc", "t"], "ERR wrong number of arguments for 'fairlock.cancel' command"),
        (&["FAIRLOCK.RENEW", "doc", "t", "1", "2"], "ERR wrong number of arguments for 'fairlock.renew' command"),
        (&["FAIRLOCK.FORCEUNLOCK"], "ERR wrong number of arguments for 'fairlock.forceunlock' command"),
        (&["FAIRLOCK.ACQUIRE", "doc", "t", "ten", "100"], "ERR value is not an integer or out of range"),
        (&["FAIRLOCK.ACQUIRE", "doc", "t", "100", "0"], "ERR wait must be a positive integer"),
        (&["FAIRLOCK.CANCEL", "doc", "w", "-1"], "ERR wait must be a positive integer"),
        (&["FAIRLOCK.ACQUIRE", "doc", "t", "100", "100", "NOQUEUE", "BLOCK", "10"], "ERR syntax error"),
        (&["FAIRLOCK.ACQUIRE", "doc", "t", "100", "100", "TOKEN", "TOKEN"], "ERR syntax error"),
        (&["FAIRLOCK.UNLOCK", "doc", "t1", "100", "LATCH", "x"], "ERR syntax error"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(*want), "{args:?}");
    }
    assert_eq!((hgetall(&mut c, "doc"), queue(&mut c), deadlines(&mut c).len()), before);
}

#[test]
fn a_key_of_another_type_is_wrongtype_and_nothing_changes() {
    let s = Server::start();
    let mut c = s.conn();
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for bad in ["doc", Q, Z] {
        ok(&mut c, &["FLUSHALL"]);
        ok(&mut c, &["SET", bad, "x"]);
        for args in [
            &["FAIRLOCK.ACQUIRE", "doc", "t", "100", "100"][..],
            &["FAIRLOCK.UNLOCK", "doc", "t", "100"],
            &["FAIRLOCK.CANCEL", "doc", "t", "100"],
            &["FAIRLOCK.FORCEUNLOCK", "doc"],
        ] {
            assert_eq!(call(&mut c, args).err().as_deref(), Some(wrongtype), "{bad}: {args:?}");
        }
        assert_eq!(keys(&mut c), [bad]);
    }
}

#[test]
fn a_replica_and_a_reload_keep_queue_and_deadlines_exactly() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    acquire(&mut c, "t1", "30000");
    for w in ["a", "b", "c"] {
        acquire(&mut c, w, "30000");
    }
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "t1", "30000"]);
    acquire(&mut c, "a", "30000");
    ok(&mut c, &["FAIRLOCK.CANCEL", "doc", "b", &WAIT.to_string()]);
    wait_replica(&mut c);
    let zset = |c: &mut redis::Connection| -> Vec<(String, String)> {
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
    };
    assert_eq!(zset(&mut rc), zset(&mut c), "the replica has the very same scores");
    assert_eq!(queue(&mut rc), ["c"]);
    assert_eq!(hgetall(&mut rc, "doc"), map(&[("a", "1")]));
    let at = |c: &mut redis::Connection| int(&ok(c, &["PEXPIRETIME", "doc"]));
    assert_eq!(at(&mut rc), at(&mut c));
    let scores = zset(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(zset(&mut c), scores);
    assert_eq!(queue(&mut c), ["c"]);
}
