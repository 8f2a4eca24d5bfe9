//! One name, two kinds of waiter (issue 29): a latch's waiters and a semaphore's parked on the
//! same name are each served by their own rule. A semaphore waiter that cannot have its
//! permits never holds back a latch waiter, nor the reverse; among the semaphores' waiters
//! (plain and expirable alike take from one counter) arrival order still holds.

use crate::common;

use common::parked::{spawn_call as park, wait_blocked};
use common::*;

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

#[test]
fn a_latch_waiter_is_not_held_back_by_a_semaphore_waiter_parked_first() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["SET", "c", "2"]);
    let sem = park(&s, &["SEMAPHORE.ACQUIRE", "c", "5", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let latch = park(&s, &["COUNTDOWN.AWAIT", "c", "BLOCK", "0"]);
    wait_blocked(&mut c, 2);
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "c"]), Value::Int(1));
    wait_blocked(&mut c, 2);
    assert_eq!(ok(&mut c, &["COUNTDOWN.DECR", "c"]), Value::Int(0));
    // The latch opened: its waiter is answered in that very command; the semaphore's waits on.
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(1)));
    wait_blocked(&mut c, 1);
    assert_eq!(get(&mut c, "c"), None, "the latch at zero is deleted, as Redisson's script does");
    let channel = "redisson_countdownlatch__channel__{c}";
    assert_eq!(sub.take(), msgs(&[(channel, "0")]));
    // The semaphore's waiter is served by its own rule: 5 permits.
    ok(&mut c, &["SEMAPHORE.RELEASE", "c", "5"]);
    assert_eq!(sem.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "c").as_deref(), Some("0"));
}

#[test]
fn a_semaphore_waiter_is_not_held_back_by_a_latch_waiter_parked_first() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "c", "1"]);
    let latch = park(&s, &["COUNTDOWN.AWAIT", "c", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    // The latch (count 1) is closed; a newcomer for 1 permit takes it: the latch waiter is in
    // another line, so nobody is ahead of the newcomer.
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "c", "1"]), Value::Int(1));
    // Taking the last permit made the count 0: the latch is open, its waiter answered.
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "c").as_deref(), Some("0"));
    // Parked: a latch waiter first (count 2, closed), then a semaphore waiter for 2 once one
    // permit was taken.
    ok(&mut c, &["SET", "c", "2"]);
    let latch = park(&s, &["COUNTDOWN.AWAIT", "c", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "c", "1"]), Value::Int(1));
    assert_eq!(get(&mut c, "c").as_deref(), Some("1"));
    wait_blocked(&mut c, 1);
    let sem = park(&s, &["SEMAPHORE.ACQUIRE", "c", "2", "BLOCK", "0"]);
    wait_blocked(&mut c, 2);
    // One more permit: the semaphore's waiter takes both, and the count at 0 opens the latch.
    ok(&mut c, &["SEMAPHORE.RELEASE", "c", "1"]);
    assert_eq!(sem.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "c").as_deref(), Some("0"));
}

#[test]
fn semaphore_waiters_keep_arrival_order_with_a_latch_waiter_among_them() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "c", "0"]);
    let three = park(&s, &["SEMAPHORE.ACQUIRE", "c", "3", "BLOCK", "0"]);
    wait_blocked(&mut c, 1);
    let latch = park(&s, &["COUNTDOWN.AWAIT", "c", "BLOCK", "0"]);
    // The count is 0: the latch is open, its waiter answered at once.
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(1)));
    ok(&mut c, &["SET", "c", "1"]);
    let latch = park(&s, &["COUNTDOWN.AWAIT", "c", "BLOCK", "0"]);
    wait_blocked(&mut c, 2);
    let one = park(&s, &["PSEMAPHORE.ACQUIRE", "c", "1", "0", "BLOCK", "0"]);
    wait_blocked(&mut c, 3);
    // One permit: the waiter for 3 came first among the semaphores' waiters, so the later
    // waiter for 1 does not take it, and a newcomer neither.
    ok(&mut c, &["SEMAPHORE.RELEASE", "c", "1"]);
    assert_eq!(ok(&mut c, &["SEMAPHORE.ACQUIRE", "c", "1"]), Value::Int(0));
    wait_blocked(&mut c, 3);
    assert_eq!(get(&mut c, "c").as_deref(), Some("2"));
    // Four: the waiter for 3 first, then the one for 1; every permit taken, the count is 0,
    // which opens the latch: all three answered in this very command.
    ok(&mut c, &["SEMAPHORE.RELEASE", "c", "2"]);
    assert_eq!(three.join().expect("thread"), Ok(Value::Int(1)));
    let ids = one.join().expect("thread");
    assert!(matches!(&ids, Ok(Value::Array(a)) if a.len() == 1), "{ids:?}");
    assert_eq!(latch.join().expect("thread"), Ok(Value::Int(1)));
    assert_eq!(get(&mut c, "c").as_deref(), Some("0"));
    wait_blocked(&mut c, 0);
}
