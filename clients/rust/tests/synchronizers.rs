//! The semaphores and the count-down latch against a real server: Redisson's keys, waits
//! parked in the server in arrival order, guards that give permits back.

mod support;

use std::time::Duration;

use redis_lockmod_client::{Error, LockClient};
use support::Server;

fn get(s: &Server, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(&mut s.conn()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_counts_permits_in_redissons_string() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sem = locks.semaphore("db");
    assert!(sem.try_set_permits(3, None).await.unwrap());
    assert!(!sem.try_set_permits(5, None).await.unwrap(), "set once");
    assert_eq!(get(&s, "db").as_deref(), Some("3"));
    let two = sem.acquire(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert_eq!(get(&s, "db").as_deref(), Some("1"));
    assert!(sem.try_acquire(2, Duration::from_millis(50)).await.unwrap().is_none());
    assert_eq!(two.release().await.unwrap(), 3);
    sem.add_permits(-1).await.unwrap();
    assert_eq!(sem.drain_permits().await.unwrap(), 2);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert_eq!(sem.release(1).await.unwrap(), 1, "permits have no owner");
    let kept = sem.acquire(1).await.unwrap();
    kept.forget();
    assert_eq!(sem.available_permits().await.unwrap(), 0, "a forgotten guard keeps its permits");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_waiters_are_served_in_arrival_order() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sem = locks.semaphore("fifo");
    sem.try_set_permits(0, None).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (i, n) in [(0, 3u64), (1, 1)] {
        let sem = sem.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let g = sem.acquire(n).await.unwrap();
            tx.send(i).unwrap();
            g.forget();
        });
        support::wait_until(Duration::from_secs(5), "parked", || s.blocked() == i + 1);
    }
    sem.release(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(rx.try_recv().is_err(), "the waiter for 1 does not overtake the waiter for 3");
    sem.release(2).await.unwrap();
    assert_eq!(rx.recv().await, Some(0), "the head is served first");
    assert_eq!(s.blocked(), 1);
    sem.release(1).await.unwrap();
    assert_eq!(rx.recv().await, Some(1));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expirable_permits_have_ids_leases_and_a_lost_signal() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let psem = locks.permit_expirable_semaphore("jobs").with_lease(Duration::from_millis(300));
    assert!(psem.try_set_permits(2).await.unwrap());
    let p = psem.acquire(1).await.unwrap();
    assert_eq!(p.ids().len(), 1);
    assert!(p.ids()[0].len() == 32 && p.ids()[0].chars().all(|c| c.is_ascii_hexdigit()));
    let score: Option<f64> =
        redis::cmd("ZSCORE").arg("{jobs}:timeout").arg(hex_bytes(&p.ids()[0])).query(&mut s.conn()).unwrap();
    assert!(score.is_some(), "Redisson's zset holds the id's bytes");
    assert_eq!(psem.acquired_permits().await.unwrap(), 1);
    assert!(p.update_lease(Duration::from_millis(200)).await.unwrap());
    tokio::time::timeout(Duration::from_secs(2), p.lost()).await.expect("the lease ran out");
    support::wait_until(Duration::from_secs(2), "the permit back", || {
        redis::cmd("PSEMAPHORE.AVAILABLE").arg("jobs").query::<i64>(&mut s.conn()).unwrap() == 2
    });
    assert!(matches!(p.release().await, Err(Error::LockLost { .. })));
    let forever = locks.permit_expirable_semaphore("jobs");
    let q = forever.acquire(2).await.unwrap();
    assert!(matches!(
        forever.release(&["00112233445566778899aabbccddeeff".to_string()]).await,
        Err(Error::NotHeld { .. })
    ));
    q.release().await.unwrap();
    assert_eq!(forever.available_permits().await.unwrap(), 2);
    locks.close().await;
}

fn hex_bytes(id: &str) -> Vec<u8> {
    (0..id.len()).step_by(2).map(|i| u8::from_str_radix(&id[i..i + 2], 16).unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_latch_wakes_every_waiter_at_zero() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let latch = locks.count_down_latch("ready");
    assert!(latch.wait(Some(Duration::ZERO)).await.unwrap(), "no latch: open");
    assert!(latch.try_set_count(2).await.unwrap());
    assert!(!latch.wait(Some(Duration::from_millis(50))).await.unwrap());
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let l = latch.clone();
            tokio::spawn(async move { l.wait(None).await })
        })
        .collect();
    support::wait_until(Duration::from_secs(5), "parked", || s.blocked() == 2);
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    for w in waiters {
        assert!(w.await.unwrap().unwrap());
    }
    assert_eq!(get(&s, "ready"), None, "the key is deleted at zero");
    locks.close().await;
}
