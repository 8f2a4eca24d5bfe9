//! The keep-alive of parked fair waiters over a long queue: moving the deadlines of everyone
//! behind a parked waiter must be one pass (and one replicated command), not a stall.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::parked::wait_blocked;
use common::*;

const Q: &str = "redisson_lock_queue:{doc}";
const Z: &str = "redisson_lock_timeout:{doc}";
const N: usize = 10_000;

#[test]
fn keeping_a_parked_waiter_alive_ahead_of_ten_thousand_others_does_not_stall_the_server() {
    let s = Server::start();
    let r = s.replica();
    let (mut c, mut rc) = (s.conn(), r.conn());
    let t0 = Instant::now();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "3000", "10"]);
    // The parked waiter's deadline is the lock's PTTL + 10 ms: soon due for a keep-alive.
    let mut pc = s.conn();
    let parked = thread::spawn(move || call(&mut pc, &["FAIRLOCK.ACQUIRE", "doc", "p", "30000", "10", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("FAIRLOCK.ACQUIRE").arg("doc").arg(format!("w{i}")).arg("30000").arg("10");
    }
    let _: Vec<Value> = pipe.query(&mut c).expect("enqueue");
    assert!(t0.elapsed() < Duration::from_millis(2500), "enqueueing took {:?}", t0.elapsed());
    ok(&mut c, &["FAIRLOCK.RENEW", "doc", "holder", "60000"]);
    // Around t0 + 2.7 s the keep-alive moves p and the 10,000 behind it.
    let mut worst = Duration::ZERO;
    let until = t0 + Duration::from_millis(3500);
    while Instant::now() < until {
        let t = Instant::now();
        ok(&mut c, &["PING"]);
        worst = worst.max(t.elapsed());
        thread::sleep(Duration::from_millis(2));
    }
    let z: Vec<(String, f64)> = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("Z");
    assert_eq!(z.len(), N + 1);
    assert_eq!(z[0].0, "p", "the parked waiter is still first");
    assert!(z[0].1 > common::diff::now_ms() as f64, "its deadline was moved past now");
    assert!(z.windows(2).all(|w| w[0].1 < w[1].1), "deadlines stay in queue order");
    // One O(N) pass takes tens of ms in a debug build on a busy machine; the quadratic walk
    // it replaced took 1.4 s here, long enough for the parked waiter to be purged anyway.
    assert!(worst < Duration::from_millis(300), "a PING waited {worst:?} behind the keep-alive");
    ok(&mut c, &["FAIRLOCK.UNLOCK", "doc", "holder", "60000"]);
    assert_eq!(parked.join().expect("parked client"), Ok(Value::Nil));
    let len: i64 = redis::cmd("LLEN").arg(Q).query(&mut c).expect("LLEN");
    assert_eq!(len, N as i64);
    // Nothing is parked now, so the primary holds still: the replica followed every move.
    wait_replica(&mut c);
    let zrange = |c: &mut redis::Connection| -> Vec<(String, String)> {
        redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
    };
    assert_eq!(zrange(&mut rc), zrange(&mut c));
}
