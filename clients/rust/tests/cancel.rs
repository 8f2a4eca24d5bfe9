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
    tokio::time::timeout(Duration::from_secs(2), parked(&s, 0)).await.expect("the waiter unparked");
    held.unlock().await.unwrap();
    locks.close().await;
    assert_eq!(support::pttl(&mut s.conn(), "c"), -2, "nothing was granted to the cancelled waiter");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_racing_the_cancellation_is_given_back() {
    let s = Server::start();
    // Short: when the grant and the CLIENT UNBLOCK meet in one server iteration, Redis 7.0
    // drops the wait's reply; it is then settled with LOCK.HOLDS after this long.
    let locks = LockClient::builder()
        .command_timeout(Duration::from_millis(500))
        .build(redis_lockmod_client::Servers::Standalone(s.client()))
        .unwrap();
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

/// The race made certain: the wait is granted (the release that grants it has returned) and
/// its future, not polled since, is dropped only then. Whether the grant's reply reached the
/// task first (the result then waits, undelivered) or the cancellation did (`CLIENT UNBLOCK`
/// finds nothing parked, the grant follows), the permits must come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_granted_to_a_cancelled_wait_are_given_back() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sem = locks.semaphore("pool");
    assert!(sem.try_set_permits(0, None).await.unwrap());
    let psem = locks.permit_expirable_semaphore("jobs").with_lease(Duration::from_secs(30));
    assert!(psem.try_set_permits(0).await.unwrap());
    for round in 0..10 {
        // Boxed, so that the drop below really drops the future (a pinned local would live on).
        let mut acquire = Box::pin(sem.acquire(2));
        tokio::select! {
            _ = &mut acquire => panic!("nothing to take yet"),
            _ = parked(&s, 1) => {}
        }
        redis::cmd("SEMAPHORE.RELEASE").arg("pool").arg(2).exec(&mut s.conn()).unwrap();
        parked(&s, 0).await; // granted in the server
        drop(acquire);
        let mut pacquire = Box::pin(psem.acquire(1));
        tokio::select! {
            _ = &mut pacquire => panic!("nothing to take yet"),
            _ = parked(&s, 1) => {}
        }
        redis::cmd("PSEMAPHORE.SETPERMITS").arg("jobs").arg(1).exec(&mut s.conn()).unwrap();
        parked(&s, 0).await;
        drop(pacquire);
        let mut c = s.conn();
        let given_back = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let avail: i64 = redis::cmd("SEMAPHORE.AVAILABLE").arg("pool").query(&mut c).unwrap();
                let held: i64 = redis::cmd("PSEMAPHORE.ACQUIRED").arg("jobs").query(&mut c).unwrap();
                if avail == 2 && held == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        given_back.await.unwrap_or_else(|_| panic!("round {round}: the raced grants were not given back"));
        redis::cmd("SET").arg("pool").arg(0).exec(&mut s.conn()).unwrap();
        redis::cmd("PSEMAPHORE.SETPERMITS").arg("jobs").arg(0).exec(&mut s.conn()).unwrap();
    }
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

async fn parked(s: &Server, n: i64) {
    while s.blocked() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_latch_wait_leaves_the_server() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let latch = locks.count_down_latch("l");
    assert!(latch.try_set_count(1).await.unwrap());
    let r = tokio::time::timeout(Duration::from_millis(50), latch.wait(None)).await;
    assert!(r.is_err());
    tokio::time::timeout(Duration::from_secs(2), parked(&s, 0)).await.expect("the waiter unparked");
    locks.close().await;
}
