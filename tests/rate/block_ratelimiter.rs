//! BLOCK on the rate limiter (issue 30): parked clients served strictly in arrival order per
//! state, woken by a timer when the oldest grant leaves the window, at once by a release, by
//! Redisson's own Lua bodies (which then look at the window again), `DEL`, expiry and
//! `FLUSHALL`; a timeout replies the wait; a
//! disconnect, a write pause, a replica and `DEBUG RELOAD`.

use crate::common;

use std::thread;
use std::time::{Duration, Instant};

use common::parked::{lockmod_stat as info, parked_beside, until_parked_beside, wait_blocked};
use common::ratelimiter::{self as rl, grants};
use common::*;

/// Starts `cmd...` on its own connection (a parked client), returning its reply.
fn park(s: &Server, cmd: &[&str]) -> thread::JoinHandle<Result<Value, String>> {
    let mut c = s.conn();
    let args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    thread::spawn(move || call(&mut c, &args.iter().map(String::as_str).collect::<Vec<_>>()))
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

/// A limiter `r` of `rate` per `interval` ms whose permits are all taken now.
fn exhausted(s: &Server, rate: &str, interval: &str) -> redis::Connection {
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", rate, interval]);
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", rate]), Value::Nil);
    c
}

#[test]
fn waiters_are_served_strictly_in_arrival_order() {
    let s = Server::start();
    let mut c = exhausted(&s, "5", "600000");
    let five = park(&s, &["RATELIMITER.ACQUIRE", "r", "5", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    let one = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "20000"]);
    wait_blocked(&mut c, 2);
    assert_eq!(info(&mut c, "ratelimiter_blocked_now"), 2);
    // One permit back: the waiter for 5 is first and the later waiter for 1 does not overtake.
    assert_eq!(ok(&mut c, &["RATELIMITER.RELEASE", "r", "1"]), Value::Int(1));
    assert!(matches!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1"]), Value::Int(_)), "a newcomer takes nothing");
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("1"));
    wait_blocked(&mut c, 2);
    // Four more: the first waiter takes its 5 in this very command.
    assert_eq!(ok(&mut c, &["RATELIMITER.RELEASE", "r", "4"]), Value::Int(5));
    assert_eq!(five.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "1"]);
    assert_eq!(one.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(grants(&mut c, "{r}:permits").iter().map(|g| g.1).sum::<u32>(), 5);
    assert_eq!((info(&mut c, "ratelimiter_handoffs"), info(&mut c, "block_timeouts")), (2, 0));
}

#[test]
fn the_oldest_grant_leaving_the_window_wakes_the_first_waiter_by_a_timer() {
    let s = Server::start();
    let mut c = exhausted(&s, "2", "400");
    let oldest = grants(&mut c, "{r}:permits")[0].0;
    let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "20000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    let g = grants(&mut c, "{r}:permits");
    assert_eq!(g.len(), 1, "the old grant is gone: {g:?}");
    // Granted once the old grant left (server clock), and not long after.
    let delay = g[0].0 - (oldest + 400);
    assert!((0..=2_000).contains(&delay), "granted {delay} ms after the window moved");
    assert_eq!(info(&mut c, "serve_timers"), 0, "no foreign change: the lock's own timer served it");
}

#[test]
fn a_timeout_replies_the_current_wait_and_lets_the_waiter_behind_be_served() {
    // big's BLOCK (300 ms) must outlast parking small behind it: where a stalled test thread
    // let it run out first, the case starts again on a fresh server.
    let (_s, mut c, big, small) = until_parked_beside(|| {
        let s = Server::start();
        let mut c = exhausted(&s, "2", "600000");
        let big = park(&s, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "300"]);
        if !parked_beside(&mut c, 1, &big) {
            return None;
        }
        let small = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "20000"]);
        parked_beside(&mut c, 2, &big).then_some((s, c, big, small))
    });
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "1"]);
    match big.join().expect("thread") {
        Ok(Value::Int(ms)) => assert!(ms > 590_000, "the wait until the oldest grant leaves: {ms}"),
        other => panic!("a timeout replies the wait, not {other:?}"),
    }
    assert_eq!(small.join().expect("thread"), Ok(Value::Nil), "served once the first one left");
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
    assert_eq!(info(&mut c, "blocked_now"), 0);
}

#[test]
fn a_disconnected_waiter_leaves_and_the_one_behind_is_served() {
    let s = Server::start();
    let mut c = exhausted(&s, "2", "600000");
    let mut gone = s.conn();
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut gone).expect("CLIENT ID");
    let big = thread::spawn(move || call(&mut gone, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    let small = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "20000"]);
    wait_blocked(&mut c, 2);
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "1"]);
    ok(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
    assert!(big.join().expect("thread").is_err());
    assert_eq!(small.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(info(&mut c, "block_disconnects"), 1);
}

#[test]
fn each_client_of_a_per_client_limiter_waits_in_its_own_queue() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "PER_CLIENT", "1", "600000"]);
    ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "CLIENT", "a"]);
    let a = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "CLIENT", "a", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    // b's window is its own: not behind a's waiter.
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "CLIENT", "b", "BLOCK", "20000"]), Value::Nil);
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "1", "CLIENT", "a"]);
    assert_eq!(a.join().expect("thread"), Ok(Value::Nil));
}

/// Redisson's Lua writes wake a parked client, which looks at the window again: its release
/// body (which only raises the value) lets nothing through, since the window is still full
/// (issue 36: the value is never taken for a release), and its setRate(KEEPSTATE) body raising
/// the rate does.
#[test]
fn redissons_bodies_wake_a_parked_waiter_which_looks_at_the_window_again() {
    let s = Server::start();
    let scripts = rl::load();
    let mut c = exhausted(&s, "3", "600000");
    rl::load_on(&mut c, &scripts);
    let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    let keys = rl::keys("r", "java-client");
    assert_eq!(rl::run(&mut c, &rl::evalsha(rl::RELEASE, &keys, &[b"2".to_vec()])), Ok(Value::Nil));
    // The waiter looked again: the window holds 3 of 3, so it stays parked, and the value is
    // the window's again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(&mut c, "{r}:value").as_deref() != Some("0") {
        assert!(Instant::now() < deadline, "the parked client never looked at the window again");
        thread::sleep(Duration::from_millis(5));
    }
    wait_blocked(&mut c, 1);
    let (secs, us): (i64, i64) = redis::cmd("TIME").query(&mut c).expect("TIME");
    let now = (secs * 1000 + us / 1000).to_string().into_bytes();
    let argv: Vec<Vec<u8>> = [&b"5"[..], b"600000", b"0", b"0", &now, b"1", b"0"].iter().map(|a| a.to_vec()).collect();
    assert_eq!(rl::run(&mut c, &rl::evalsha(rl::SET_OR_UPDATE, &keys, &argv)), Ok(Value::Int(1)));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(grants(&mut c, "{r}:permits").iter().map(|g| g.1).sum::<u32>(), 5);
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
}

#[test]
fn deleting_the_grants_or_their_expiry_wakes_the_waiter_and_grants_it() {
    for how in ["DEL", "PEXPIRE"] {
        let s = Server::start();
        let mut c = exhausted(&s, "2", "600000");
        let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "20000"]);
        wait_blocked(&mut c, 1);
        let t = Instant::now();
        match how {
            "DEL" => ok(&mut c, &["DEL", "{r}:permits", "{r}:value"]),
            _ => ok(&mut c, &["PEXPIRE", "{r}:value", "50"]),
        };
        if how == "PEXPIRE" {
            ok(&mut c, &["PEXPIRE", "{r}:permits", "50"]);
        }
        assert_eq!(w.join().expect("thread"), Ok(Value::Nil), "{how}");
        assert!(t.elapsed() < Duration::from_secs(5), "{how}");
        assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"), "{how}");
    }
}

#[test]
fn deleting_the_limiter_or_flushing_answers_the_waiter_with_the_error() {
    for how in ["DEL", "FLUSHALL"] {
        let s = Server::start();
        let mut c = exhausted(&s, "2", "600000");
        let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "20000"]);
        wait_blocked(&mut c, 1);
        match how {
            "DEL" => ok(&mut c, &["DEL", "r"]),
            _ => ok(&mut c, &["FLUSHALL"]),
        };
        assert_eq!(w.join().expect("thread"), Err("ERR RateLimiter is not initialized".into()), "{how}");
    }
}

#[test]
fn a_write_pause_holds_the_grant_until_writes_resume() {
    let s = Server::start();
    let mut c = exhausted(&s, "1", "500");
    let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["CLIENT", "PAUSE", "3000", "WRITE"]);
    // The grant leaves the window inside the pause; the waiter is not granted (no write).
    thread::sleep(Duration::from_millis(1_500));
    assert_eq!(grants(&mut c, "{r}:permits").len(), 1);
    assert_eq!(info(&mut c, "ratelimiter_blocked_now"), 1);
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
}

#[test]
fn a_timeout_inside_a_pause_replies_the_wait_and_writes_nothing() {
    // The BLOCK (300 ms) must run out inside the pause: where a stalled test thread let it run
    // out before the pause began, the case starts again on a fresh server.
    let (_s, mut c, w, before) = until_parked_beside(|| {
        let s = Server::start();
        let mut c = exhausted(&s, "1", "600000");
        let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "300"]);
        if !parked_beside(&mut c, 1, &w) {
            return None;
        }
        let before = common::acl::snapshot(&mut c);
        ok(&mut c, &["CLIENT", "PAUSE", "2000", "WRITE"]);
        (info(&mut c, "block_timeouts") == 0).then_some((s, c, w, before))
    });
    match w.join().expect("thread") {
        Ok(Value::Int(ms)) => assert!(ms > 590_000, "{ms}"),
        other => panic!("{other:?}"),
    }
    ok(&mut c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(common::acl::snapshot(&mut c), before);
}

#[test]
fn a_grant_to_a_parked_client_reaches_the_replica_and_survives_a_reload() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = exhausted(&s, "2", "600000");
    let w = park(&s, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "20000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "2"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    wait_replica(&mut c);
    let want = common::acl::snapshot(&mut c);
    assert_eq!(common::acl::snapshot(&mut replica.conn()), want);
    // A replica never parks: the write command is refused there.
    let mut rc = replica.conn();
    let refused = call(&mut rc, &["RATELIMITER.ACQUIRE", "r", "1", "BLOCK", "1000"]);
    assert!(refused.is_err_and(|e| e.starts_with("READONLY")));
}

#[test]
fn client_unblock_ends_a_wait_with_the_wait_or_an_error_and_the_next_waiter_moves_up() {
    let s = Server::start();
    let mut c = exhausted(&s, "2", "600000");
    for (how, want_err) in [("TIMEOUT", false), ("ERROR", true)] {
        let mut w = s.conn();
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut w).expect("CLIENT ID");
        let h = thread::spawn(move || call(&mut w, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "0"]));
        wait_blocked(&mut c, 1);
        assert_eq!(ok(&mut c, &["CLIENT", "UNBLOCK", &id.to_string(), how]), Value::Int(1));
        match h.join().expect("thread") {
            Ok(Value::Int(ms)) if !want_err => assert!(ms > 590_000, "{ms}"),
            Err(e) if want_err => assert!(e.starts_with("UNBLOCKED"), "{e}"),
            other => panic!("{how}: {other:?}"),
        }
        assert_eq!(info(&mut c, "ratelimiter_blocked_now"), 0);
    }
    // Nothing was taken by the waiters that left.
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
    assert_eq!(grants(&mut c, "{r}:permits").iter().map(|g| g.1).sum::<u32>(), 2);
}
