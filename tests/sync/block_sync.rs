//! BLOCK on the synchronizers (issue 26): semaphore waiters served strictly in arrival order,
//! latch waiters all woken at zero, wake-ups from every source (the module's commands, a
//! Redisson-style Lua `INCRBY`, `DEL`, the reclaim timer), timeouts and disconnects.

use crate::common;

use std::thread;

use common::parked::{lockmod_stat as info, parked_beside, spawn_call as park, until_parked_beside, wait_blocked};
use common::*;

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn semaphore_waiters_are_served_strictly_in_arrival_order() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "0"]);
    let three = park(&s, &["SEMAPHORE.ACQUIRE", "s", "3", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    let one = park(&s, &["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "20000"]);
    wait_blocked(&mut c, 2);
    assert_eq!(info(&mut c, "sync_blocked_now"), 2);
    // One permit: the waiter for 3 is first, and the later waiter for 1 does not overtake it.
    assert_eq!(ok(&mut c, &["SEMAPHORE.RELEASE", "s", "1"]), Value::Int(1));
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]), Value::Int(0), "a newcomer takes nothing");
    assert_eq!(get(&mut c, "s").as_deref(), Some("1"));
    wait_blocked(&mut c, 2);
    // Two more: the first waiter takes its 3, in this very command.
    assert_eq!(ok(&mut c, &["SEMAPHORE.RELEASE", "s", "2"]), Value::Int(3));
    assert_eq!(three.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    ok(&mut c, &["SEMAPHORE.ADDPERMITS", "s", "1"]);
    assert_eq!(one.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    assert_eq!((info(&mut c, "sync_handoffs"), info(&mut c, "block_timeouts")), (2, 0));
}

#[test]
fn several_waiters_that_fit_are_served_together() {
    let s = Server::start();
    let mut c = s.conn();
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let w = park(&s, &["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "20000"]);
            wait_blocked(&mut c, i + 1);
            w
        })
        .collect();
    assert_eq!(ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "2"]), Value::Int(1));
    wait_blocked(&mut c, 1);
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    ok(&mut c, &["SEMAPHORE.RELEASE", "s", "5"]);
    for w in waiters {
        assert_eq!(w.join().expect("thread"), Ok(Value::Int(1)));
    }
    assert_eq!(get(&mut c, "s").as_deref(), Some("4"));
}

#[test]
fn a_foreign_lua_incrby_wakes_a_parked_semaphore_waiter() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "0"]);
    let w = park(&s, &["SEMAPHORE.ACQUIRE", "s", "2", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    // Redisson's release: `incrby` and a publish, from a script.
    let release = "local v = redis.call('incrby', KEYS[1], ARGV[1]); redis.call('publish', KEYS[2], v); return v";
    assert_eq!(ok(&mut c, &["EVAL", release, "2", "s", "redisson_sc:{s}", "2"]), Value::Int(2));
    assert_eq!(w.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    assert_eq!((info(&mut c, "sync_handoffs"), info(&mut c, "block_timeouts")), (1, 0));
}

#[test]
fn a_timeout_replies_the_refusal_and_lets_the_waiter_behind_be_served() {
    // big's BLOCK (300 ms) must outlast parking small behind it: where a stalled test thread
    // let it run out first, the case starts again on a fresh server.
    let (s, mut c, big, small) = until_parked_beside(|| {
        let s = Server::start();
        let mut c = s.conn();
        ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "1"]);
        let big = park(&s, &["SEMAPHORE.ACQUIRE", "s", "5", "BLOCK", "300"]);
        if !parked_beside(&mut c, 1, &big) {
            return None;
        }
        let small = park(&s, &["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "20000"]);
        parked_beside(&mut c, 2, &big).then_some((s, c, big, small))
    });
    assert_eq!(big.join().expect("thread"), Ok(Value::Int(0)));
    assert_eq!(small.join().expect("thread"), Ok(Value::Int(1)), "served once the first one left");
    assert_eq!(get(&mut c, "s").as_deref(), Some("0"));
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "0"]);
    let p = park(&s, &["PSEMAPHORE.ACQUIRE", "p", "1", "1000", "BLOCK", "100"]);
    assert_eq!(p.join().expect("thread"), Ok(Value::Nil));
    let l = park(&s, &["COUNTDOWN.AWAIT", "l", "BLOCK", "100"]);
    assert_eq!(l.join().expect("thread"), Ok(Value::Int(1)), "an absent latch is open");
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "l", "1"]);
    let l = park(&s, &["COUNTDOWN.AWAIT", "l", "BLOCK", "100"]);
    assert_eq!(l.join().expect("thread"), Ok(Value::Int(0)));
    assert_eq!(info(&mut c, "blocked_now"), 0);
}

#[test]
fn a_disconnected_waiter_leaves_and_the_one_behind_is_served() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SEMAPHORE.TRYSETPERMITS", "s", "1"]);
    let mut gone = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut gone).expect("CLIENT ID");
    let big = thread::spawn(move || call(&mut gone, &["SEMAPHORE.ACQUIRE", "s", "5", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    let small = park(&s, &["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "20000"]);
    wait_blocked(&mut c, 2);
    ok(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert!(big.join().expect("thread").is_err());
    assert_eq!(small.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(info(&mut c, "blocked_now"), 0);
    assert_eq!(info(&mut c, "block_disconnects"), 1);
}

#[test]
fn every_latch_waiter_is_woken_at_zero_and_by_a_delete() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "l", "2"]);
    let waiters: Vec<_> = (0..3)
        .map(|i| {
            let w = park(&s, &["COUNTDOWN.AWAIT", "l", "BLOCK", "20000"]);
            wait_blocked(&mut c, i + 1);
            w
        })
        .collect();
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(1));
    wait_blocked(&mut c, 3);
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "l"]), Value::Int(0));
    for w in waiters {
        assert_eq!(w.join().expect("thread"), Ok(Value::Int(1)));
    }
    ok(&mut c, &["COUNTDOWN.TRYSETCOUNT", "m", "5"]);
    let w = park(&s, &["COUNTDOWN.AWAIT", "m", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["EVAL", "return redis.call('del', KEYS[1])", "1", "m"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(info(&mut c, "block_timeouts"), 0);
}

#[test]
fn the_reclaim_timer_hands_an_expired_permit_to_the_first_parked_waiter() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "1"]);
    let held: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(1).arg(300).query(&mut c).expect("granted");
    let sub = s.subscriber();
    let w = park(&s, &["PSEMAPHORE.ACQUIRE", "p", "1", "60000", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    let Ok(Value::Array(ids)) = w.join().expect("thread") else { panic!("not granted") };
    assert_eq!(ids.len(), 1);
    assert_ne!(ids[0], Value::BulkString(held[0].clone().into_bytes()));
    assert_eq!(get(&mut c, "p").as_deref(), Some("0"));
    assert_eq!(ok(&mut c, &["PSEMAPHORE.ACQUIRED", "p"]), Value::Int(1));
    assert_eq!(sub.take(), msgs(&[("redisson_sc:{p}", "1")]), "the reclaim published");
    assert_eq!((info(&mut c, "sync_handoffs"), info(&mut c, "permits_reclaimed")), (1, 1));
}

#[test]
fn a_waiter_without_block_limit_stays_parked_until_served_and_sync_info_lists_it() {
    let s = Server::start();
    let mut c = s.conn();
    let w = park(&s, &["SEMAPHORE.ACQUIRE", "s", "2", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let Value::Array(items) = ok(&mut c, &["SYNC.INFO", "s"]) else { panic!("array") };
    let text = format!("{items:?}");
    assert!(text.contains("semaphore") && text.contains("parked_total"), "{text}");
    ok(&mut c, &["SEMAPHORE.RELEASE", "s", "2"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Int(1)));
}

#[test]
fn a_lease_ending_while_writes_are_paused_comes_back_when_they_resume() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "1"]);
    redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(1).arg(100).query::<Vec<String>>(&mut c).expect("granted");
    ok(&mut c, &["CLIENT", "PAUSE", "800", "WRITE"]);
    // Past the lease end, inside the pause: nothing may be written.
    thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(get(&mut c, "p").as_deref(), Some("0"));
    assert_eq!(ok(&mut c, &["ZCARD", "{p}:timeout"]), Value::Int(1));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&mut c, "p").as_deref() != Some("1") {
        assert!(std::time::Instant::now() < deadline, "the permit never came back");
        thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(ok(&mut c, &["ZCARD", "{p}:timeout"]), Value::Int(0));
}
