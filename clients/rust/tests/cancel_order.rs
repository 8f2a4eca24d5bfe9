//! What a drop starts comes before what the caller does next (issue 34): dropping an acquire
//! future ends its wait in the server, and gives back a grant that raced the drop, before the
//! client's next request on that name; so does a dropped guard's release. An unlock right after
//! a cancelled wait never hands the lock to that waiter, and the next acquire never meets the
//! grant being given back.

mod support;

use std::time::Duration;

use redis_lockmod_client::{LockClient, Unlocked};
use support::{command_calls, hgetall, pttl, Server};

async fn parked(s: &Server, n: i64) {
    while s.blocked() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// A raw client parked with `cmd` (in a thread), to see whom the server hands things to.
fn park_raw(s: &Server, cmd: redis::Cmd) -> std::thread::JoinHandle<redis::Value> {
    let mut c = s.conn();
    std::thread::spawn(move || cmd.query::<redis::Value>(&mut c).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_right_after_a_dropped_wait_never_hands_the_lock_to_it() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    for round in 0..30 {
        let name = format!("order{round}");
        let held = locks.lock(&name).acquire().await.unwrap();
        // Boxed, so that the drop below really drops the future.
        let waiter = locks.lock(&name);
        let mut wait = Box::pin(waiter.acquire());
        tokio::select! {
            _ = &mut wait => panic!("round {round}: granted while held"),
            _ = parked(&s, 1) => {}
        }
        let x = park_raw(&s, redis::cmd("LOCK.ACQUIRE").arg(&name).arg("x:1").arg(60_000).arg("BLOCK").arg(0).clone());
        parked(&s, 2).await;
        redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
        drop(wait);
        held.unlock().await.unwrap();
        let got = tokio::task::spawn_blocking(move || x.join().unwrap()).await.unwrap();
        assert_eq!(got, redis::Value::Nil, "round {round}: the waiter behind is granted");
        assert_eq!(hgetall(&mut c, &name), vec![("x:1".to_string(), "1".to_string())]);
        assert_eq!(
            command_calls(&mut c, "LOCK.UNLOCK"),
            1,
            "round {round}: the holder's unlock only: the cancelled waiter was never granted (nothing given back)"
        );
        redis::cmd("LOCK.UNLOCK").arg(&name).arg("x:1").arg(60_000).exec(&mut c).unwrap();
    }
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_acquire_of_a_reentrant_lock_after_a_dropped_wait_is_never_a_reentry() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    for round in 0..30 {
        let name = format!("again{round}");
        let held = locks.lock(&name).acquire().await.unwrap();
        let me = locks.lock(&name).reentrant();
        let mut wait = Box::pin(me.acquire());
        tokio::select! {
            _ = &mut wait => panic!("round {round}: granted while held"),
            _ = parked(&s, 1) => {}
        }
        // The release and the drop race: the grant may reach the waiter first.
        let release = tokio::spawn(held.unlock());
        drop(wait);
        release.await.unwrap().unwrap();
        let g = me.acquire().await.unwrap();
        assert_eq!(
            g.hold_count().await.unwrap(),
            1,
            "round {round}: one hold, not a reentry on a grant being given back"
        );
        assert_eq!(g.unlock().await.unwrap(), Unlocked::Last, "round {round}");
        assert_eq!(pttl(&mut c, &name), -2, "round {round}: free after the only hold's unlock");
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_right_after_a_dropped_semaphore_wait_goes_to_the_next_waiter() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    let sem = locks.semaphore("slots");
    assert!(sem.try_set_permits(0, None).await.unwrap());
    for round in 0..20 {
        let mut wait = Box::pin(sem.acquire(1));
        tokio::select! {
            _ = &mut wait => panic!("round {round}: nothing to take yet"),
            _ = parked(&s, 1) => {}
        }
        let x = park_raw(&s, redis::cmd("SEMAPHORE.ACQUIRE").arg("slots").arg(1).arg("BLOCK").arg(0).clone());
        parked(&s, 2).await;
        redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
        drop(wait);
        sem.release(1).await.unwrap();
        let got = tokio::task::spawn_blocking(move || x.join().unwrap()).await.unwrap();
        assert_eq!(got, redis::Value::Int(1), "round {round}: the waiter behind takes it");
        assert_eq!(command_calls(&mut c, "SEMAPHORE.RELEASE"), 1, "round {round}: nothing given back");
        assert_eq!(sem.available_permits().await.unwrap(), 0);
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_before_the_clients_next_request_on_the_lock() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sem = locks.semaphore("dropped-sem");
    assert!(sem.try_set_permits(1, None).await.unwrap());
    for round in 0..50 {
        drop(locks.lock("dropped").acquire().await.unwrap());
        let next = locks.lock("dropped").try_acquire(Duration::ZERO).await.unwrap();
        assert!(next.is_some(), "round {round}: the dropped guard's release came first");
        drop(next);
        drop(sem.acquire(1).await.unwrap());
        assert_eq!(sem.available_permits().await.unwrap(), 1, "round {round}: the dropped permit came back first");
    }
    locks.close().await;
    assert_eq!(pttl(&mut s.conn(), "dropped"), -2);
}
