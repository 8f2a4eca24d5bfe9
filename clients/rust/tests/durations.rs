//! No `Duration` panics (issue 34): a wait too long for the server (`Duration::MAX`) waits
//! without limit, as tokio's timers saturate; a lease or setting that long is capped or refused
//! with an error, never a panic in a task of the client. A runtime that shut down is its own
//! error, not `Closed`.

mod support;

use std::time::Duration;

use redis_lockmod_client::{Error, LockClient, RateType, Servers};
use support::{pttl, Server};

async fn parked(s: &Server, n: i64) {
    while s.blocked() != n {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_of_duration_max_waits_without_limit_for_every_kind() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();

    let lock = locks.lock("forever");
    let g = lock.try_acquire(Duration::MAX).await.unwrap().expect("free: granted at once");
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_acquire(Duration::MAX).await }
    });
    parked(&s, 1).await;
    g.unlock().await.unwrap();
    let g = waiter.await.unwrap().unwrap().expect("granted from BLOCK 0");
    g.unlock().await.unwrap();
    let fair = locks.fair_lock("forever-fair");
    fair.try_acquire(Duration::MAX).await.unwrap().expect("granted").unlock().await.unwrap();

    let sem = locks.semaphore("forever-sem");
    assert!(sem.try_set_permits(0, Some(Duration::MAX)).await.unwrap());
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.try_acquire(1, Duration::MAX).await }
    });
    parked(&s, 1).await;
    sem.release(1).await.unwrap();
    waiter.await.unwrap().unwrap().expect("granted").release().await.unwrap();

    let jobs = locks.permit_expirable_semaphore("forever-jobs").with_lease(Duration::MAX);
    assert!(jobs.try_set_permits(1).await.unwrap());
    let permit = jobs.try_acquire(1, Duration::MAX).await.unwrap().expect("granted");
    assert!(permit.update_lease(Duration::MAX).await.unwrap());
    permit.release().await.unwrap();

    let limiter = locks.rate_limiter("forever-rate");
    limiter.try_set_rate(RateType::Overall, 1, Duration::from_secs(3600), None).await.unwrap();
    assert!(limiter.try_acquire(1, Duration::MAX).await.unwrap());
    let r = limiter.set_rate(RateType::Overall, 1, Duration::MAX, Default::default()).await;
    assert!(matches!(r, Ok(_) | Err(Error::Redis(_))), "the server's answer, not a panic: {r:?}");

    let latch = locks.count_down_latch("forever-latch");
    assert!(latch.try_set_count(1).await.unwrap());
    let waiter = tokio::spawn({
        let latch = latch.clone();
        async move { latch.wait(Some(Duration::MAX)).await }
    });
    parked(&s, 1).await;
    latch.count_down().await.unwrap();
    assert!(waiter.await.unwrap().unwrap());
    assert_eq!(s.blocked(), 0);
    locks.close().await;
    assert_eq!(pttl(&mut c, "forever"), -2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_of_duration_max_is_held_without_a_deadline() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let g = locks.lock("long").with_lease(Duration::MAX).acquire().await.unwrap();
    let ttl = pttl(&mut s.conn(), "long");
    assert!(ttl > 1 << 61, "the longest lease the server takes: {ttl}");
    assert!(!g.is_lost());
    let rw = locks.read_write_lock("long-rw").reentrant().with_lease(Duration::MAX);
    let w = rw.write().acquire().await.unwrap();
    // A re-entered write adds its lease to the time left (Redisson's rule): past what the
    // server takes, the server's error.
    let again = rw.write().acquire().await;
    assert!(matches!(&again, Err(Error::Redis(e)) if e.to_string().contains("invalid expire")), "{again:?}");
    let r = rw.read().acquire().await.unwrap();
    for h in [r.unlock().await, w.unlock().await, g.unlock().await] {
        h.unwrap();
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_of_duration_max_build_a_working_client() {
    let s = Server::start();
    let locks = LockClient::builder()
        .command_timeout(Duration::MAX)
        .connect_timeout(Duration::MAX)
        .resolve_timeout(Duration::MAX)
        .sync_timeout(Duration::MAX)
        .watchdog_lease(Duration::MAX)
        .renew_interval(Duration::MAX)
        .build(Servers::Standalone(s.client()))
        .unwrap();
    let lock = locks.lock("settings");
    let g = lock.try_acquire(Duration::from_millis(100)).await.unwrap().expect("free");
    assert!(lock.try_acquire(Duration::from_millis(50)).await.unwrap().is_none());
    g.unlock().await.unwrap();
    let g = lock.acquire().await.unwrap();
    drop(g);
    locks.close().await;
    assert_eq!(pttl(&mut s.conn(), "settings"), -2);
}

#[test]
fn a_runtime_that_shut_down_is_its_own_error() {
    let s = Server::start();
    let first = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let locks = first.block_on(async { LockClient::new(s.client()).unwrap() });
    drop(first);
    let other = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let r = other.block_on(locks.lock("orphan").acquire());
    assert!(matches!(r, Err(Error::RuntimeShutdown)), "{r:?}");
    let r = other.block_on(locks.semaphore("orphan-sem").try_acquire(1, Duration::ZERO));
    assert!(matches!(r, Err(Error::RuntimeShutdown)), "{r:?}");
    assert!(Error::RuntimeShutdown.to_string().contains("runtime"));
}
