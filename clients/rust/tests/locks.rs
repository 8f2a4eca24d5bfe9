//! The locks against a real server: grants, reentrancy, waiting in the server, hand-off in
//! arrival order, fencing, the read-write and fair locks, with the keyspace and the messages
//! checked. (`SERVER=redis|redis8|valkey cargo test -p redis-lockmod-client --test locks`)

mod support;

use std::time::Duration;

use redis_lockmod_client::{Error, LockClient, Unlocked};
use support::{hgetall, pttl, Server, Subscriber};

async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not reached within 10 s");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Parks `n` waiters on `lock(i)`, one after the other (each parked before the next comes);
/// each reports its index when granted, holds `hold`, and releases. Returns the reports.
async fn park_waiters(
    s: &Server,
    n: i64,
    hold: Duration,
    lock: impl Fn() -> redis_lockmod_client::Lock,
) -> tokio::sync::mpsc::UnboundedReceiver<i64> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..n {
        let lock = lock();
        let tx = tx.clone();
        tokio::spawn(async move {
            let g = lock.acquire().await.unwrap();
            tx.send(i).unwrap();
            tokio::time::sleep(hold).await;
            g.unlock().await.unwrap();
        });
        eventually("the waiter parked", || s.blocked() == i + 1).await;
    }
    rx
}

async fn arrivals(rx: &mut tokio::sync::mpsc::UnboundedReceiver<i64>, n: usize) -> Vec<i64> {
    let mut order = Vec::new();
    for _ in 0..n {
        order.push(rx.recv().await.unwrap());
    }
    order
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_writes_redissons_layout_and_an_unlock_frees_and_publishes() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let sub = Subscriber::start(&s);
    let lock = locks.lock("orders");
    let g = lock.acquire().await.unwrap();
    assert!(g.owner().starts_with(&format!("{}:", locks.id())), "owner is <uuid>:<n>: {}", g.owner());
    let mut c = s.conn();
    assert_eq!(hgetall(&mut c, "orders"), vec![(g.owner().to_string(), "1".to_string())]);
    let ttl = pttl(&mut c, "orders");
    assert!(ttl > 29_000 && ttl <= 30_000, "the watchdog lease: {ttl}");
    assert_eq!(g.unlock().await.unwrap(), Unlocked::Last);
    assert_eq!(sub.expect("redisson_lock__channel:{orders}"), "0");
    let exists: i64 = redis::cmd("EXISTS").arg("orders").query(&mut c).unwrap();
    assert_eq!(exists, 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reentrant_lock_object_reenters_and_another_is_refused() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let lock = locks.lock("re").reentrant().with_lease(Duration::from_secs(10));
    let a = lock.acquire().await.unwrap();
    let b = lock.clone().acquire().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let other = locks.lock("re").reentrant();
    assert!(other.try_acquire(Duration::ZERO).await.unwrap().is_none(), "another holder is refused");
    assert!(lock.is_locked().await.unwrap() && !other.is_held().await.unwrap());
    assert!(
        locks.lock("re").try_acquire(Duration::ZERO).await.unwrap().is_none(),
        "a lock object without an owner of its own is another holder each time"
    );
    assert_eq!(b.unlock().await.unwrap(), Unlocked::HoldsLeft);
    let ttl = pttl(&mut s.conn(), "re");
    assert!(ttl > 9_000, "a partial unlock sets the lease again: {ttl}");
    assert_eq!(a.unlock().await.unwrap(), Unlocked::Last);
    assert!(other.try_acquire(Duration::ZERO).await.unwrap().is_some());
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_park_in_the_server_and_are_granted_in_arrival_order() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let first = locks.lock("fifo").acquire().await.unwrap();
    let mut rx = park_waiters(&s, 3, Duration::from_millis(20), || locks.lock("fifo")).await;
    assert_eq!(s.blocked(), 3, "waiting is the server's BLOCK, no polling");
    first.unlock().await.unwrap();
    assert_eq!(arrivals(&mut rx, 3).await, vec![0, 1, 2]);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_with_a_timeout_ends_in_the_server_and_returns_none() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let _held = locks.lock("t").acquire().await.unwrap();
    let started = std::time::Instant::now();
    assert!(locks.lock("t").try_acquire(Duration::from_millis(150)).await.unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(140));
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fenced_grant_takes_the_next_token_of_the_name() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let lock = locks.lock("ledger").reentrant().fenced();
    let a = lock.acquire().await.unwrap();
    let b = lock.acquire().await.unwrap();
    assert_eq!((a.token(), b.token()), (Some(1), Some(2)), "reentrant grants too");
    b.unlock().await.unwrap();
    a.unlock().await.unwrap();
    let w = locks.read_write_lock("ledger").write().fenced().acquire().await.unwrap();
    assert_eq!(w.token(), Some(3), "one counter per name, whatever the kind");
    w.unlock().await.unwrap();
    let token: i64 = redis::cmd("GET").arg("redisson_lock_token:{ledger}").query(&mut s.conn()).unwrap();
    assert_eq!(token, 3);
    let read = locks.read_write_lock("ledger").read().fenced();
    assert!(matches!(read.acquire().await, Err(Error::InvalidArgument(_))));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_a_writer_excludes_and_its_last_write_release_downgrades() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let rw1 = locks.read_write_lock("doc").reentrant();
    let rw2 = locks.read_write_lock("doc");
    let r1 = rw1.read().acquire().await.unwrap();
    let r2 = rw2.read().acquire().await.unwrap();
    assert!(rw2.write().try_acquire(Duration::ZERO).await.unwrap().is_none());
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let sub = Subscriber::start(&s);
    let w = rw1.write().acquire().await.unwrap();
    assert!(rw2.read().try_acquire(Duration::ZERO).await.unwrap().is_none());
    let r = rw1.read().acquire().await.unwrap();
    let mut c = s.conn();
    let fields = hgetall(&mut c, "doc");
    assert!(fields.contains(&("mode".into(), "write".into())), "{fields:?}");
    assert!(fields.contains(&(format!("{}:write", w.owner()), "1".into())), "{fields:?}");
    assert_eq!(Some(w.owner()), rw1.read().owner(), "one holder for both sides");
    assert_eq!(w.unlock().await.unwrap(), Unlocked::Last);
    let mode: String = redis::cmd("HGET").arg("doc").arg("mode").query(&mut c).unwrap();
    assert_eq!(mode, "read", "downgraded: the owner keeps its read hold");
    assert!(rw2.read().try_acquire(Duration::ZERO).await.unwrap().is_some_and(|g| {
        drop(g);
        true
    }));
    r.unlock().await.unwrap();
    assert_eq!(sub.expect("redisson_rwlock:{doc}"), "0", "the last read unlock frees it and publishes");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_lock_serves_its_queue_in_order_and_a_try_does_not_queue() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let first = locks.fair_lock("tickets").acquire().await.unwrap();
    assert!(locks.fair_lock("tickets").try_acquire(Duration::ZERO).await.unwrap().is_none());
    let queued: i64 = redis::cmd("LLEN").arg("redisson_lock_queue:{tickets}").query(&mut s.conn()).unwrap();
    assert_eq!(queued, 0, "NOQUEUE: Redisson's tryLock()");
    let mut rx = park_waiters(&s, 3, Duration::ZERO, || locks.fair_lock("tickets")).await;
    let queued: Vec<String> =
        redis::cmd("LRANGE").arg("redisson_lock_queue:{tickets}").arg(0).arg(-1).query(&mut s.conn()).unwrap();
    assert_eq!(queued.len(), 3, "parked waiters keep their place in Redisson's queue");
    first.unlock().await.unwrap();
    assert_eq!(arrivals(&mut rx, 3).await, vec![0, 1, 2]);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_in_the_background() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let lock = locks.lock("dropped");
    {
        let _g = lock.acquire().await.unwrap();
    }
    let mut c = s.conn();
    eventually("the lock freed", || redis::cmd("EXISTS").arg("dropped").query::<i64>(&mut c).unwrap() == 0).await;
    let next = locks.lock("dropped").try_acquire(Duration::ZERO).await.unwrap();
    assert!(next.is_some());
    drop(next);
    locks.close().await;
    let exists: i64 = redis::cmd("EXISTS").arg("dropped").query(&mut s.conn()).unwrap();
    assert_eq!(exists, 0, "close waits for the background releases");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    assert!(matches!(locks.lock("").acquire().await, Err(Error::InvalidArgument(_))));
    assert!(matches!(locks.lock("x").with_lease(Duration::ZERO).acquire().await, Err(Error::InvalidArgument(_))));
    redis::cmd("SET").arg("str").arg("v").exec(&mut s.conn()).unwrap();
    match locks.lock("str").acquire().await {
        Err(Error::Redis(e)) => assert_eq!(e.code(), Some("WRONGTYPE")),
        other => panic!("expected WRONGTYPE, got {other:?}"),
    }
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_unlock_future_still_releases_exactly_one_hold_and_is_recorded() {
    let s = Server::start();
    let locks = redis_lockmod_client::LockClient::builder()
        .watchdog_lease(Duration::from_millis(900))
        .renew_interval(Duration::from_millis(300))
        .build(redis_lockmod_client::Servers::Standalone(s.client()))
        .unwrap();
    let lock = locks.lock("half-unlocked").reentrant();
    let renewals = || support::command_calls(&mut s.conn(), "LOCK.RENEW");
    let mut cut = 0;
    for round in 0..50u64 {
        if cut == 5 {
            break;
        }
        let outer = lock.acquire().await.unwrap();
        let inner = lock.acquire().await.unwrap();
        // Polled once (the request is on its way) and dropped: the same latched request goes
        // out again and its outcome is recorded. (Under load the reply can come within that
        // one poll: then nothing was cut, and the round is not counted.)
        let mut unlock = Box::pin(inner.unlock());
        let answered = tokio::select! {
            biased;
            r = &mut unlock => Some(r),
            _ = std::future::ready(()) => None,
        };
        drop(unlock);
        if let Some(r) = answered {
            assert_eq!(r.unwrap(), Unlocked::HoldsLeft);
            outer.unlock().await.unwrap();
            continue;
        }
        cut += 1;
        eventually("one hold released", || {
            hgetall(&mut s.conn(), "half-unlocked") == vec![(outer.owner().to_string(), "1".to_string())]
        })
        .await;
        assert_eq!(outer.unlock().await.unwrap(), Unlocked::Last, "round {round}");
        // A renewal already on its way when the lock was released lands within this.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let before = renewals();
        // Longer than the renew interval: a holder still counted as holding would renew.
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(renewals(), before, "round {round}: nothing held, nothing renewed (the count was recorded)");
    }
    assert_eq!(cut, 5, "five unlocks cut after one poll");
    locks.close().await;
}
