//! The watchdog and the lost signal: a lock held without a lease is renewed; a lock lost while
//! held (force unlock, a lease too short, a renewal finding it gone) fires the guard's token and
//! its unlock reports `LockLost` without sending anything.

mod support;

use std::time::Duration;

use redis_lockmod_client::{Error, LockClient};
use support::{pttl, Server};

fn fast(s: &Server) -> LockClient {
    LockClient::builder()
        .watchdog_lease(Duration::from_millis(600))
        .renew_interval(Duration::from_millis(150))
        .build(redis_lockmod_client::Servers::Standalone(s.client()))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_lock_held_past_its_lease_and_stops_at_release() {
    let s = Server::start();
    let locks = fast(&s);
    let lock = locks.lock("wd");
    let g = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let ttl = pttl(&mut s.conn(), "wd");
    assert!(ttl > 0 && ttl <= 600, "renewed, never past the watchdog lease: {ttl}");
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(pttl(&mut s.conn(), "wd"), -2, "nothing renews a released lock");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_force_unlock_by_someone_else_is_found_by_the_next_renewal() {
    let s = Server::start();
    let locks = fast(&s);
    let g = locks.lock("forced").acquire().await.unwrap();
    let lost = g.lost();
    let token = g.lost_token();
    let freed: i64 = redis::cmd("LOCK.FORCEUNLOCK").arg("forced").query(&mut s.conn()).unwrap();
    assert_eq!(freed, 1);
    tokio::time::timeout(Duration::from_secs(2), lost).await.expect("the lost signal fires");
    assert!(token.is_cancelled() && g.is_lost());
    // Someone else takes it meanwhile: the lost guard's unlock must not touch their hold.
    let other = locks.lock("forced").acquire().await.unwrap();
    assert!(matches!(g.unlock().await, Err(Error::LockLost { .. })));
    assert!(locks.lock("forced").try_acquire(Duration::ZERO).await.unwrap().is_none(), "the other hold is intact");
    other.unlock().await.unwrap();
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_that_runs_out_is_reported_lost() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let g = locks.lock("short").with_lease(Duration::from_millis(200)).acquire().await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), g.lost()).await.expect("lost when the lease ran out");
    assert!(matches!(g.unlock().await, Err(Error::LockLost { .. })));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_by_the_holder_loses_its_own_guards() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let lock = locks.lock("self-forced");
    let g = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(g.is_lost());
    assert!(matches!(g.unlock().await, Err(Error::LockLost { .. })));
    assert!(!lock.force_unlock().await.unwrap());
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlock_finding_the_lock_gone_reports_it_lost() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let g = locks.lock("gone").acquire().await.unwrap();
    redis::cmd("DEL").arg("gone").exec(&mut s.conn()).unwrap();
    assert!(matches!(g.unlock().await, Err(Error::LockLost { .. })));
    locks.close().await;
}

#[test]
fn the_blocking_api_holds_and_releases() {
    let s = Server::start();
    let locks = redis_lockmod_client::blocking::LockClient::new(s.client()).unwrap();
    let lock = locks.lock("sync").fenced();
    let g = lock.acquire().unwrap();
    assert_eq!(g.token(), Some(1));
    assert!(locks.lock("sync").try_acquire(Duration::from_millis(50)).unwrap().is_none());
    let waiter = {
        let other = locks.lock("sync").fenced();
        std::thread::spawn(move || other.acquire().map(|g| g.token()))
    };
    s.wait_blocked(1);
    g.unlock().unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), Some(2), "granted from BLOCK, the guard dropped in its thread");
    support::wait_until(Duration::from_secs(5), "the dropped guard released", || pttl(&mut s.conn(), "sync") == -2);
    let sem = locks.semaphore("s");
    assert!(sem.try_set_permits(1, None).unwrap());
    let p = sem.acquire(1).unwrap();
    assert!(sem.try_acquire(1, Duration::ZERO).unwrap().is_none());
    assert_eq!(p.release().unwrap(), 1);
    locks.close().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_blocking_api_refuses_to_block_inside_a_runtime() {
    let s = Server::start();
    let locks =
        tokio::task::spawn_blocking(move || (redis_lockmod_client::blocking::LockClient::new(s.client()).unwrap(), s))
            .await
            .unwrap();
    let r = locks.0.lock("x").acquire();
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    tokio::task::spawn_blocking(move || drop(locks)).await.unwrap();
}

/// The watchdog is one task per client, not one per hold (issue 34: a task per grant cost
/// wake-ups of other worker threads on every acquire, most of the library's time uncontended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_add_no_task() {
    let s = Server::start();
    // The default renew interval (10 s): no renewal task runs while the test counts.
    let locks = LockClient::new(s.client()).unwrap();
    let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
    // The connection's driver task and the watchdog's exist after a first hold.
    let first = locks.lock("warm").acquire().await.unwrap();
    let before = tasks();
    let mut guards = vec![first];
    for i in 0..100 {
        guards.push(locks.lock(&format!("many{i}")).acquire().await.unwrap());
    }
    assert!(tasks() <= before, "{} tasks for 101 holds, {before} for one", tasks());
    for g in guards {
        g.unlock().await.unwrap();
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_holds_are_each_renewed_by_the_one_watchdog() {
    let s = Server::start();
    let locks = fast(&s);
    let mut guards = Vec::new();
    for i in 0..20 {
        guards.push(locks.lock(&format!("many{i}")).acquire().await.unwrap());
    }
    // Past the watchdog lease (600 ms): every hold was renewed, none lost.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut c = s.conn();
    for (i, g) in guards.iter().enumerate() {
        assert!(!g.is_lost(), "hold {i} lost");
        let ttl = pttl(&mut c, &format!("many{i}"));
        assert!(ttl > 0 && ttl <= 600, "hold {i} renewed: {ttl}");
    }
    for g in guards {
        g.unlock().await.unwrap();
    }
    locks.close().await;
}
