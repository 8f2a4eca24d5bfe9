//! Dropping an acquire future (a `select!`, a `timeout`) ends the wait in the server
//! (`CLIENT UNBLOCK`), and a grant that raced the cancellation is given back: no grant is left
//! that nobody knows of. The same for the synchronizers.

mod support;

use std::time::Duration;

use rand::Rng;
use redis_lockmod_client::LockClient;
use support::{Server, Subscriber};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_wait_leaves_the_servers_queue_at_once() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let held = locks.lock("c").acquire().await.unwrap();
    let waiter = locks.lock("c");
    let r = tokio::time::timeout(Duration::from_millis(100), waiter.acquire()).await;
    assert!(r.is_err(), "the wait was cut short");
    support::wait_until(Duration::from_secs(2), "the waiter unparked", || s.blocked() == 0);
    held.unlock().await.unwrap();
    locks.close().await;
    assert_eq!(support::pttl(&mut s.conn(), "c"), -2, "nothing was granted to the cancelled waiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_racing_the_cancellation_is_given_back() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sub = Subscriber::start(&s);
    let mut rng = rand::thread_rng();
    for round in 0..30 {
        let name = format!("race{round}");
        let held = locks.lock(&name).acquire().await.unwrap();
        let waiter = locks.lock(&name);
        let cut = Duration::from_micros(rng.gen_range(0..3000));
        let release = Duration::from_micros(rng.gen_range(0..3000));
        let w = tokio::spawn(async move {
            tokio::time::timeout(cut + Duration::from_millis(5), waiter.acquire()).await.map(|g| g.map(drop))
        });
        tokio::time::sleep(Duration::from_millis(5) + release).await;
        held.unlock().await.unwrap();
        let _ = w.await.unwrap();
        let _ = sub.expect(&format!("redisson_lock__channel:{{{name}}}"));
    }
    locks.close().await;
    let mut c = s.conn();
    for round in 0..30 {
        assert_eq!(support::pttl(&mut c, &format!("race{round}")), -2, "round {round}: a grant left held");
    }
    assert_eq!(s.blocked(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_granted_to_a_cancelled_wait_are_given_back() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sem = locks.semaphore("pool");
    assert!(sem.try_set_permits(1, None).await.unwrap());
    let mut rng = rand::thread_rng();
    for _ in 0..30 {
        let held =
            tokio::time::timeout(Duration::from_secs(5), sem.acquire(1)).await.expect("a permit leaked").unwrap();
        let other = sem.clone();
        let cut = Duration::from_micros(rng.gen_range(0..3000));
        let w = tokio::spawn(async move {
            tokio::time::timeout(cut + Duration::from_millis(5), other.acquire(1)).await.map(|g| g.map(drop))
        });
        tokio::time::sleep(Duration::from_millis(5) + Duration::from_micros(rng.gen_range(0..3000))).await;
        held.release().await.unwrap();
        let _ = w.await.unwrap();
    }
    locks.close().await;
    let avail: i64 = redis::cmd("SEMAPHORE.AVAILABLE").arg("pool").query(&mut s.conn()).unwrap();
    assert_eq!(avail, 1, "every permit came back");
    assert_eq!(s.blocked(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_latch_wait_leaves_the_server() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let latch = locks.count_down_latch("l");
    assert!(latch.try_set_count(1).await.unwrap());
    let r = tokio::time::timeout(Duration::from_millis(50), latch.wait(None)).await;
    assert!(r.is_err());
    support::wait_until(Duration::from_secs(2), "the waiter unparked", || s.blocked() == 0);
    locks.close().await;
}
