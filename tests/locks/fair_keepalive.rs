//! The keep-alive of parked fair waiters over a long queue: moving the deadlines of everyone
//! behind a parked waiter must be one pass (and one replicated command), not a stall.

use crate::common;

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
    let (t0, t0_ms) = (Instant::now(), common::diff::now_ms());
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "doc", "holder", "6000", "10"]);
    // The parked waiter's deadline is the lock's PTTL + 10 ms: soon due for a keep-alive.
    let mut pc = s.conn();
    // BLOCK 0 waits for the unlock at the end, after 10,000 enqueues and a 6.5 s wait: on a
    // loaded machine, longer than a connection's usual 30 s read timeout.
    pc.set_read_timeout(Some(Duration::from_secs(300))).expect("timeout");
    let parked = thread::spawn(move || call(&mut pc, &["FAIRLOCK.ACQUIRE", "doc", "p", "30000", "10", "BLOCK", "0"]));
    wait_blocked(&mut c, 1);
    let mut pipe = redis::pipe();
    for i in 0..N {
        pipe.cmd("FAIRLOCK.ACQUIRE").arg("doc").arg(format!("w{i}")).arg("30000").arg("10");
    }
    let _: Vec<Value> = pipe.query(&mut c).expect("enqueue");
    // Renewed as a watchdog would, the holder keeps the lock; p's deadline stays where it was.
    assert_eq!(ok(&mut c, &["FAIRLOCK.RENEW", "doc", "holder", "60000"]), Value::Int(1));
    // Around t0 + 5.7 s the keep-alive moves p and the 10,000 behind it.
    thread::sleep((t0 + Duration::from_millis(6500)).saturating_duration_since(Instant::now()));
    let z: Vec<(String, f64)> = redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(&mut c).expect("Z");
    assert_eq!(z.len(), N + 1);
    assert_eq!(z[0].0, "p", "the parked waiter is still first");
    assert!(z[0].1 > (t0_ms + 6_500) as f64, "its deadline was moved past where it was due");
    assert!(z.windows(2).all(|w| w[0].1 < w[1].1), "deadlines stay in queue order");
    // (The quadratic walk this replaced took 1.4 s here: long enough for the waiters it was
    // moving to be purged meanwhile, which the assertions above catch.)
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
