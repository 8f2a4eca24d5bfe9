//! Dropping an acquire future (a `select!`, a `timeout`) ends the wait in the server
//! (`CLIENT UNBLOCK`), and a grant that raced the cancellation is given back: no grant is left
//! that nobody knows of. The same for the synchronizers and the rate limiter.
//!
//! A grant and the unblock may meet in one server iteration: the module then answers the
//! unblock with the grant (on Redis 7.0 the server alone would drop that reply), so the library
//! gets it at once and gives it back. The `*_meeting_its_unblock_*` tests make them meet for
//! sure (the server sleeps while the grant, then the unblock, reach it) and check that the grant
//! comes back promptly, from the library, with no lost reply to settle.

mod support;

use std::future::Future;
use std::time::Duration;

use rand::Rng;
use redis_lockmod_client::{LockClient, RateType};
use support::{command_calls, Server, Subscriber};

/// How soon a grant given back after its wait's cancellation must be back: far below the
/// command timeout (10 s), which a lost reply would cost.
const PROMPTLY: Duration = Duration::from_secs(2);

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
    // The default command timeout: a wait's reply that did not come would cost 10 s.
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
        let mut c = s.conn();
        eventually(&format!("round {round}: the lock free"), || support::pttl(&mut c, &name) == -2).await;
    }
    locks.close().await;
    assert_eq!(command_calls(&mut s.conn(), "LOCK.HOLDS"), 0, "every wait got its reply: none was settled");
    assert_eq!(s.blocked(), 0);
}

/// Polls `cond` until it holds, or fails the test if it does not within [`PROMPTLY`].
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {PROMPTLY:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Makes `grant` (a command of the test's) and the `CLIENT UNBLOCK` of the cancelled `wait`
/// meet in one server iteration: `wait` parks; the server sleeps; `grant` reaches it, then
/// `wait` is dropped, so that the library's unblock reaches it too; the server wakes and runs
/// them in that order. The library must have idle connections for its unblock (see `warm`).
async fn grant_meets_unblock<F: Future>(s: &Server, wait: F, grant: redis::Cmd) {
    // Boxed, so that the drop below really drops the future (a pinned local would live on).
    let mut wait = Box::pin(wait);
    tokio::select! {
        _ = &mut wait => panic!("nothing to take yet"),
        _ = parked(s, 1) => {}
    }
    let mut granter = s.conn();
    let sleeper = tokio::task::block_in_place(|| s.sleep(0.3));
    let granted = std::thread::spawn(move || grant.query::<redis::Value>(&mut granter).unwrap());
    // The grant's bytes reach the sleeping server first; then the unblock's.
    tokio::time::sleep(Duration::from_millis(30)).await;
    drop(wait);
    tokio::task::spawn_blocking(move || {
        granted.join().unwrap();
        sleeper.join().unwrap();
    })
    .await
    .unwrap();
}

/// Opens idle connections of the library's (concurrent reads), so that a cancellation's
/// `CLIENT UNBLOCK` goes out on one at once, not after a handshake with a sleeping server.
async fn warm(locks: &LockClient) {
    let l = locks.lock("warm");
    let (a, b, c) = tokio::join!(l.is_locked(), l.is_locked(), l.is_locked());
    assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (false, false, false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_granted_to_a_wait_meeting_its_unblock_is_given_back_at_once() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    for (round, lock) in [locks.lock("meet"), locks.fair_lock("meet-fair")].into_iter().enumerate() {
        let name = lock.name().to_string();
        let unlock_cmd = if round == 0 { "LOCK.UNLOCK" } else { "FAIRLOCK.UNLOCK" };
        let acquire_cmd = if round == 0 { "LOCK.ACQUIRE" } else { "FAIRLOCK.ACQUIRE" };
        let mut acquire = redis::cmd(acquire_cmd);
        acquire.arg(&name).arg("test:1").arg(60_000);
        if round == 1 {
            acquire.arg(300_000);
        }
        acquire.exec(&mut c).unwrap();
        warm(&locks).await;
        redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
        let grant = redis::cmd(unlock_cmd).arg(&name).arg("test:1").arg(60_000).clone();
        grant_meets_unblock(&s, lock.acquire(), grant).await;
        eventually(&format!("{name}: the grant given back"), || support::pttl(&mut c, &name) == -2).await;
        assert_eq!(command_calls(&mut c, unlock_cmd), 2, "{name}: the test's unlock, and the library's give-back");
        assert_eq!(command_calls(&mut c, "client|unblock"), 1, "{name}: the unblock found the wait parked");
        let holds = if round == 0 { "LOCK.HOLDS" } else { "FAIRLOCK.HOLDS" };
        assert_eq!(command_calls(&mut c, holds), 0, "{name}: the wait's reply came: nothing to settle");
        assert_eq!(s.blocked(), 0);
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_granted_to_a_wait_meeting_its_unblock_are_given_back_at_once() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    let sem = locks.semaphore("meet-pool");
    assert!(sem.try_set_permits(0, None).await.unwrap());
    warm(&locks).await;
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
    grant_meets_unblock(&s, sem.acquire(2), redis::cmd("SEMAPHORE.RELEASE").arg("meet-pool").arg(2).clone()).await;
    eventually("the permits given back", || redis::cmd("GET").arg("meet-pool").query::<String>(&mut c).unwrap() == "2")
        .await;
    assert_eq!(command_calls(&mut c, "SEMAPHORE.RELEASE"), 2, "the test's release, and the library's give-back");

    let psem = locks.permit_expirable_semaphore("meet-jobs").with_lease(Duration::from_secs(60));
    assert!(psem.try_set_permits(0).await.unwrap());
    warm(&locks).await;
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
    grant_meets_unblock(&s, psem.acquire(1), redis::cmd("PSEMAPHORE.SETPERMITS").arg("meet-jobs").arg(1).clone()).await;
    eventually("the permit given back", || {
        redis::cmd("ZCARD").arg("{meet-jobs}:timeout").query::<i64>(&mut c).unwrap() == 0
            && redis::cmd("GET").arg("meet-jobs").query::<String>(&mut c).unwrap() == "1"
    })
    .await;
    assert_eq!(command_calls(&mut c, "PSEMAPHORE.RELEASE"), 1, "the library gave the permit's id back");
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_permits_granted_to_a_wait_meeting_its_unblock_are_given_back_at_once() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    let limiter = locks.rate_limiter("meet-api");
    limiter.try_set_rate(RateType::Overall, 2, Duration::from_secs(3600), None).await.unwrap();
    assert!(limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    warm(&locks).await;
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
    let grant = redis::cmd("RATELIMITER.RELEASE").arg("meet-api").arg(2).clone();
    grant_meets_unblock(&s, limiter.acquire(2), grant).await;
    eventually("the permits given back", || {
        redis::cmd("GET").arg("{meet-api}:value").query::<String>(&mut c).unwrap() == "2"
            && redis::cmd("ZCARD").arg("{meet-api}:permits").query::<i64>(&mut c).unwrap() == 0
    })
    .await;
    assert_eq!(command_calls(&mut c, "RATELIMITER.RELEASE"), 2, "the test's release, and the library's give-back");
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_rate_limiter_wait_leaves_the_queue_and_takes_nothing() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("drop-api");
    limiter.try_set_rate(RateType::Overall, 2, Duration::from_secs(3600), None).await.unwrap();
    assert!(limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    let r = tokio::time::timeout(Duration::from_millis(100), limiter.acquire(1)).await;
    assert!(r.is_err(), "the wait was cut short");
    tokio::time::timeout(Duration::from_secs(2), parked(&s, 0)).await.expect("the waiter unparked");
    locks.close().await;
    assert_eq!(limiter.release(2).await.unwrap(), 2, "the cancelled waiter took nothing");
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

/// Without the permission for `CLIENT UNBLOCK` a cancelled wait's connection is closed at once
/// (the server then drops the waiter, and the module gives back a grant it had not answered
/// yet), not after the command timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_client_unblock_a_dropped_wait_closes_its_connection_at_once() {
    let s = Server::start();
    let mut c = s.conn();
    redis::cmd("ACL")
        .arg(&["SETUSER", "nounblock", "on", "nopass", "~*", "&*", "+@all", "-client|unblock"][..])
        .exec(&mut c)
        .unwrap();
    let client = redis::Client::open(format!("redis://nounblock:any@127.0.0.1:{}/", s.port)).unwrap();
    let locks = LockClient::new(client).unwrap();
    let held = locks.lock("nounblock").acquire().await.unwrap();
    let r = tokio::time::timeout(Duration::from_millis(100), locks.lock("nounblock").acquire()).await;
    assert!(r.is_err(), "the wait was cut short");
    tokio::time::timeout(PROMPTLY, parked(&s, 0)).await.expect("the waiter's connection closed at once");
    held.unlock().await.unwrap();
    eventually("the lock free", || support::pttl(&mut c, "nounblock") == -2).await;
    assert!(command_calls(&mut c, "client|unblock") == 0, "refused by the ACL: not run");
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
