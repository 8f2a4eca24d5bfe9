//! FAIRLOCK.* against a real redis-server: every branch, with the reply, the queue list, the
//! deadline zset (scores checked against the test's clock within a tolerance), the lock's PTTL
//! and what each waiter hears on its own channel.

mod common;

use std::time::Duration;

use common::diff::now_ms;
use common::*;

const K: &str = "orders";
const Q: &str = "redisson_lock_queue:{orders}";
const Z: &str = "redisson_lock_timeout:{orders}";

fn chan(owner: &str) -> String {
    format!("redisson_lock__channel:{{orders}}:{owner}")
}

fn acquire(c: &mut redis::Connection, owner: &str, lease: &str, wait: &str) -> Value {
    ok(c, &["FAIRLOCK.ACQUIRE", K, owner, lease, wait])
}

fn queue(c: &mut redis::Connection) -> Vec<String> {
    redis::cmd("LRANGE").arg(Q).arg(0).arg(-1).query(c).expect("LRANGE")
}

/// The deadlines as (member, ms from now).
fn deadlines(c: &mut redis::Connection) -> Vec<(String, i64)> {
    let z: Vec<(String, f64)> = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    let now = now_ms();
    z.into_iter().map(|(m, s)| (m, s as i64 - now)).collect()
}

#[track_caller]
fn assert_deadlines(c: &mut redis::Connection, expected: &[(&str, i64)]) {
    let got = deadlines(c);
    let members: Vec<&str> = got.iter().map(|(m, _)| m.as_str()).collect();
    let want: Vec<&str> = expected.iter().map(|(m, _)| *m).collect();
    assert_eq!(members, want);
    for ((_, g), (_, w)) in got.iter().zip(expected) {
        assert_near(*g, *w, 150);
    }
}

#[test]
fn the_seed_004_story_queues_t2_and_t3_and_hands_over_in_order() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    // t1 takes the free lock.
    assert_eq!(acquire(&mut c, "t1", "30000", "5000"), Value::Nil);
    assert_eq!(hgetall(&mut c, K), map(&[("t1", "1")]));
    assert_eq!(queue(&mut c), Vec::<String>::new());
    // t2 queues: base = the lock's PTTL, deadline = base + wait.
    assert_near(int(&acquire(&mut c, "t2", "30000", "5000")), 30_000, 50);
    // t3 queues behind t2: base = t2's deadline - now.
    assert_near(int(&acquire(&mut c, "t3", "30000", "5000")), 35_000, 50);
    assert_eq!(queue(&mut c), vec!["t2", "t3"]);
    assert_deadlines(&mut c, &[("t2", 35_000), ("t3", 40_000)]);
    // t2 again: already queued, the PTTL; nothing moves.
    assert_near(int(&acquire(&mut c, "t2", "30000", "5000")), 30_000, 50);
    assert_eq!(queue(&mut c), vec!["t2", "t3"]);
    // t1 unlocks: only t2 hears it, on its own channel.
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "t1", "30000"]), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[(&chan("t2"), "0")]));
    // t3 may not jump the queue: the lock is free but t2 is first.
    assert_eq!(acquire(&mut c, "t3", "30000", "5000"), Value::Int(0));
    assert_eq!(acquire(&mut c, "t2", "30000", "5000"), Value::Nil);
    assert_eq!(hgetall(&mut c, K), map(&[("t2", "1")]));
    assert_eq!(queue(&mut c), vec!["t3"]);
    // t2's grant pulled t3's deadline forward by its wait.
    assert_deadlines(&mut c, &[("t3", 35_000)]);
    assert_near(pttl(&mut c, K), 30_000, 50);
}

#[test]
fn five_waiters_are_granted_in_fifo_order_each_hearing_only_its_own_channel() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    acquire(&mut c, "w0", "30000", "10000");
    let waiters = ["w1", "w2", "w3", "w4", "w5"];
    for w in waiters {
        assert!(int(&acquire(&mut c, w, "30000", "10000")) > 0);
    }
    assert_eq!(queue(&mut c), waiters);
    let mut holder = "w0";
    for (i, w) in waiters.iter().enumerate() {
        // Everyone behind the head is refused even though the lock is free.
        assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, holder, "30000"]), Value::Int(1));
        assert_eq!(sub.take(), msgs(&[(&chan(w), "0")]));
        for later in &waiters[i + 1..] {
            assert_eq!(acquire(&mut c, later, "30000", "10000"), Value::Int(0));
        }
        assert_eq!(acquire(&mut c, w, "30000", "10000"), Value::Nil);
        assert_eq!(queue(&mut c), waiters[i + 1..].to_vec());
        holder = w;
    }
    assert_eq!(keys(&mut c), vec![K.to_string()]);
}

#[test]
fn a_waiter_whose_deadline_passes_is_purged_and_the_next_is_served() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", "200", "100");
    acquire(&mut c, "b", "30000", "100"); // deadline ~ +300
    acquire(&mut c, "c", "30000", "100"); // deadline ~ +400
    std::thread::sleep(Duration::from_millis(330));
    assert_eq!(acquire(&mut c, "c", "30000", "100"), Value::Nil);
    assert_eq!(hgetall(&mut c, K), map(&[("c", "1")]));
    assert_eq!(keys(&mut c), vec![K.to_string()]);
}

#[test]
fn cancel_in_the_middle_of_the_queue_pulls_the_later_waiters_forward() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", "30000", "1000");
    for w in ["b", "c", "d", "e"] {
        acquire(&mut c, w, "30000", "1000");
    }
    assert_eq!(ok(&mut c, &["FAIRLOCK.CANCEL", K, "c", "1000"]), Value::Int(1));
    assert_eq!(queue(&mut c), vec!["b", "d", "e"]);
    assert_deadlines(&mut c, &[("b", 31_000), ("d", 32_000), ("e", 33_000)]);
    // Not queued: 0, nothing changes.
    assert_eq!(ok(&mut c, &["FAIRLOCK.CANCEL", K, "zz", "1000"]), Value::Int(0));
    assert_eq!(queue(&mut c), vec!["b", "d", "e"]);
}

#[test]
fn the_holder_reenters_and_renews() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", "30000", "1000");
    acquire(&mut c, "b", "30000", "1000");
    assert_eq!(acquire(&mut c, "a", "5000", "1000"), Value::Nil);
    assert_eq!(hgetall(&mut c, K), map(&[("a", "2")]));
    assert_near(pttl(&mut c, K), 5_000, 50);
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", K, "a", "9000"]), Value::Int(1));
    assert_near(pttl(&mut c, K), 9_000, 50);
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", K, "b", "9000"]), Value::Int(0));
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "a", "7000"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, K), map(&[("a", "1")]));
    assert_near(pttl(&mut c, K), 7_000, 50);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "b", "7000"]), Value::Nil);
}

#[test]
fn noqueue_replies_1_without_joining_the_queue() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "a", "30000", "1000", "NOQUEUE"]), Value::Nil);
    assert_eq!(ok(&mut c, &["FAIRLOCK.ACQUIRE", K, "b", "30000", "1000", "noqueue"]), Value::Int(1));
    assert_eq!(keys(&mut c), vec![K.to_string()]);
}

#[test]
fn unlock_of_an_absent_lock_notifies_the_head_waiter() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    acquire(&mut c, "a", "30000", "5000");
    acquire(&mut c, "b", "30000", "5000");
    ok(&mut c, &["DEL", K]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "x", "30000"]), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[(&chan("b"), "0")]));
    assert_eq!(queue(&mut c), vec!["b"]);
    // Nobody queued: nobody hears anything, still 1.
    ok(&mut c, &["DEL", Q, Z]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "x", "30000"]), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[]));
}

#[test]
fn force_unlock_deletes_the_lock_and_wakes_the_head() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    acquire(&mut c, "a", "30000", "5000");
    acquire(&mut c, "b", "30000", "5000");
    acquire(&mut c, "c", "30000", "5000");
    assert_eq!(ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", K]), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[(&chan("b"), "0")]));
    assert_eq!(queue(&mut c), vec!["b", "c"]);
    assert_eq!(ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", K]), Value::Int(0));
    assert_eq!(sub.take(), msgs(&[]));
}

#[test]
fn the_unlock_latch_replays_the_first_outcome() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", "30000", "5000");
    let unlock = ["FAIRLOCK.UNLOCK", K, "a", "30000", "LATCH", "r1", "5000"];
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    acquire(&mut c, "b", "30000", "5000");
    assert_eq!(ok(&mut c, &unlock), Value::Int(1));
    assert_eq!(hgetall(&mut c, K), map(&[("b", "1")]));
}

#[rustfmt::skip]
const BAD: &[(&[&str], &str)] = &[
    (&["FAIRLOCK.ACQUIRE", K, "a", "100"],                "ERR wrong number of arguments for 'fairlock.acquire' command"),
    (&["FAIRLOCK.ACQUIRE", K, "a", "x", "100"],           "ERR value is not an integer or out of range"),
    (&["FAIRLOCK.ACQUIRE", K, "a", "100", "0"],           "ERR wait must be a positive integer"),
    (&["FAIRLOCK.ACQUIRE", K, "a", "-5", "100"],          "ERR lease must be a positive integer"),
    (&["FAIRLOCK.ACQUIRE", K, "a", "100", "100", "NOPE"], "ERR syntax error"),
    (&["FAIRLOCK.ACQUIRE", K, "a", "100", "100", "BLOCK"], "ERR syntax error"),
    (&["FAIRLOCK.UNLOCK", K, "a"],                        "ERR wrong number of arguments for 'fairlock.unlock' command"),
    (&["FAIRLOCK.UNLOCK", K, "a", "100", "LATCH", "r"],   "ERR syntax error"),
    (&["FAIRLOCK.CANCEL", K, "a"],                        "ERR wrong number of arguments for 'fairlock.cancel' command"),
    (&["FAIRLOCK.CANCEL", K, "a", "1.5"],                 "ERR value is not an integer or out of range"),
    (&["FAIRLOCK.RENEW", K, "a", "100", "x"],             "ERR wrong number of arguments for 'fairlock.renew' command"),
    (&["FAIRLOCK.FORCEUNLOCK"],                           "ERR wrong number of arguments for 'fairlock.forceunlock' command"),
];

#[test]
fn bad_input_gets_a_redis_error_and_changes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "h", "30000", "5000");
    acquire(&mut c, "w", "30000", "5000");
    let before = common::diff::dump(&mut c);
    for (args, err) in BAD {
        assert_eq!(call(&mut c, args).err().as_deref(), Some(*err), "{args:?}");
    }
    let after = common::diff::dump(&mut c);
    assert_eq!(before.iter().map(|e| &e.1).collect::<Vec<_>>(), after.iter().map(|e| &e.1).collect::<Vec<_>>());
}

#[test]
fn a_lock_queue_or_zset_of_another_type_is_wrongtype_and_left_alone() {
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    for bad in [K, Q, Z] {
        let s = Server::start();
        let mut c = s.conn();
        ok(&mut c, &["SET", bad, "x"]);
        for args in [
            &["FAIRLOCK.ACQUIRE", K, "a", "100", "100"][..],
            &["FAIRLOCK.UNLOCK", K, "a", "100"],
            &["FAIRLOCK.CANCEL", K, "a", "100"],
            &["FAIRLOCK.FORCEUNLOCK", K],
        ] {
            assert_eq!(call(&mut c, args).err().as_deref(), Some(wrongtype), "{bad}: {args:?}");
        }
        assert_eq!(keys(&mut c), vec![bad.to_string()]);
        assert_eq!(ok(&mut c, &["GET", bad]), Value::BulkString(b"x".to_vec()));
    }
}

#[test]
fn a_replica_gets_the_same_queue_and_deadlines() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    acquire(&mut c, "a", "30000", "2000");
    for w in ["b", "c", "d", "e"] {
        acquire(&mut c, w, "30000", "2000");
    }
    ok(&mut c, &["FAIRLOCK.CANCEL", K, "c", "2000"]);
    ok(&mut c, &["FAIRLOCK.FORCEUNLOCK", K]);
    acquire(&mut c, "b", "30000", "2000");
    wait_replica(&mut c);
    let zr = |c: &mut redis::Connection| -> Vec<(String, String)> {
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
    };
    // Absolute scores: identical, not merely near.
    assert_eq!(zr(&mut rc), zr(&mut c));
    assert_eq!(queue(&mut rc), queue(&mut c));
    assert_eq!(queue(&mut c), vec!["d", "e"]);
    assert_eq!(hgetall(&mut rc, K), map(&[("b", "1")]));
    assert_near(pttl(&mut rc, K), pttl(&mut c, K), 50);
}

#[test]
fn the_queue_survives_debug_reload() {
    let s = Server::start();
    let mut c = s.conn();
    acquire(&mut c, "a", "30000", "5000");
    acquire(&mut c, "b", "30000", "5000");
    acquire(&mut c, "c", "30000", "5000");
    let before = deadlines(&mut c);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(queue(&mut c), vec!["b", "c"]);
    let after = deadlines(&mut c);
    assert_eq!(after.len(), before.len());
    for (x, y) in before.iter().zip(&after) {
        assert_near(x.1, y.1, 100);
    }
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", K, "a", "30000"]), Value::Int(1));
    assert_eq!(acquire(&mut c, "b", "30000", "5000"), Value::Nil);
}
