//! The guard is the hold (issue 34): tasks sharing one lock object (clones, an `Arc`) exclude
//! each other, as with `Arc<tokio::sync::Mutex>`, for every kind of lock; Redisson's
//! reentrance is a choice (`reentrant()`, `with_owner`); a guard moves into a spawned task.
//! The critical section proves it: a holder key written with `SET NX` inside it must never be
//! there already.

mod support;

use std::sync::Arc;
use std::time::Duration;

use redis_lockmod_client::{Error, Lock, LockClient, LockGuard, Unlocked};
use support::{hgetall, Server};

/// `tasks` tasks, each taking `lock` (shared: an `Arc` when `arc`, else clones) `rounds` times;
/// inside, `SET holder <task> NX` must succeed. Returns how many found someone inside.
async fn overlaps(s: &Server, lock: Lock, arc: bool, tasks: usize, rounds: usize) -> i64 {
    let shared = Arc::new(lock.clone());
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (lock, shared) = (lock.clone(), shared.clone());
        let client = s.client();
        handles.push(tokio::spawn(async move {
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            let mut overlaps = 0i64;
            for _ in 0..rounds {
                let g = if arc { shared.acquire().await.unwrap() } else { lock.acquire().await.unwrap() };
                let set: Option<String> =
                    redis::cmd("SET").arg("holder").arg(t).arg("NX").query_async(&mut c).await.unwrap();
                overlaps += i64::from(set.is_none());
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _: i64 = redis::cmd("DEL").arg("holder").query_async(&mut c).await.unwrap();
                g.unlock().await.unwrap();
            }
            overlaps
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_sharing_one_lock_object_exclude_each_other_for_every_kind() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let kinds: Vec<(&str, Lock)> = vec![
        ("reentrant", locks.lock("shared")),
        ("fenced", locks.lock("shared-fenced").fenced()),
        ("fair", locks.fair_lock("shared-fair")),
        ("write", locks.read_write_lock("shared-rw").write()),
        ("leased", locks.lock("shared-leased").with_lease(Duration::from_secs(30))),
    ];
    for (what, lock) in kinds {
        for arc in [true, false] {
            let n = overlaps(&s, lock.clone(), arc, 4, 10).await;
            assert_eq!(
                n,
                0,
                "{what} (shared as {}): {n} critical sections found another task inside",
                if arc { "an Arc" } else { "clones" }
            );
        }
    }
    let left: Vec<String> = redis::cmd("KEYS").arg("shared*").query(&mut s.conn()).unwrap();
    assert!(left.is_empty(), "every lock free: {left:?}");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_the_readers_of_its_own_read_write_lock_object() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let rw = locks.read_write_lock("doc");
    let r1 = rw.read().acquire().await.unwrap();
    let r2 = rw.read().acquire().await.unwrap();
    assert_ne!(r1.owner(), r2.owner(), "each read hold is a holder of its own");
    assert!(rw.write().try_acquire(Duration::ZERO).await.unwrap().is_none(), "readers hold it");
    r1.unlock().await.unwrap();
    r2.unlock().await.unwrap();
    let w = rw.write().acquire().await.unwrap();
    assert!(
        rw.read().try_acquire(Duration::ZERO).await.unwrap().is_none(),
        "the writer excludes its own object's readers"
    );
    assert!(rw.write().try_acquire(Duration::ZERO).await.unwrap().is_none());
    assert_eq!(w.unlock().await.unwrap(), Unlocked::Last);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrance_is_a_choice_and_each_of_its_holds_is_a_guard() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let plain = locks.lock("re");
    assert_eq!(plain.owner(), None, "no owner of its own");
    assert!(matches!(plain.hold_count().await, Err(Error::InvalidArgument(_))), "ask the guard instead");
    let me = locks.lock("re").reentrant();
    let owner = me.owner().expect("one owner").to_string();
    assert!(owner.starts_with(&format!("{}:", locks.id())));
    let a = me.acquire().await.unwrap();
    let b = me.clone().acquire().await.unwrap();
    assert_eq!((a.owner(), b.owner()), (owner.as_str(), owner.as_str()), "a clone is the same holder");
    assert_eq!((me.hold_count().await.unwrap(), a.hold_count().await.unwrap()), (2, 2));
    assert_eq!(hgetall(&mut s.conn(), "re"), vec![(owner.clone(), "2".to_string())]);
    assert!(plain.try_acquire(Duration::ZERO).await.unwrap().is_none(), "the plain object is someone else");
    assert_eq!(b.unlock().await.unwrap(), Unlocked::HoldsLeft);
    assert_eq!(a.unlock().await.unwrap(), Unlocked::Last);
    // Redisson's name for it (a Java thread's `<uuid>:<thread id>`): the same hold.
    let java = locks.lock("re").with_owner("9f1c0b52-0d5c-4b1e-a3c5-2b0f3c6a8e11:1");
    let held = java.acquire().await.unwrap();
    let again = locks.lock("re").with_owner("9f1c0b52-0d5c-4b1e-a3c5-2b0f3c6a8e11:1").acquire().await.unwrap();
    assert_eq!(held.hold_count().await.unwrap(), 2);
    again.unlock().await.unwrap();
    held.unlock().await.unwrap();
    let rw = locks.read_write_lock("rw").reentrant();
    let w = rw.write().acquire().await.unwrap();
    let r = rw.read().acquire().await.unwrap();
    assert_eq!(w.owner(), r.owner(), "Redisson's: the writer may also read");
    assert_eq!(w.unlock().await.unwrap(), Unlocked::Last);
    let mode: String = redis::cmd("HGET").arg("rw").arg("mode").query(&mut s.conn()).unwrap();
    assert_eq!(mode, "read", "downgraded");
    r.unlock().await.unwrap();
    locks.close().await;
}

fn is_owned<T: Send + Sync + 'static>(_: &T) {}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_moves_into_a_spawned_task_and_holds_there() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let lock = Arc::new(locks.lock("moved"));
    let guard: LockGuard = lock.acquire().await.unwrap();
    is_owned(&guard);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let worker = tokio::spawn(async move {
        let _ = rx.await;
        guard.unlock().await
    });
    assert!(lock.try_acquire(Duration::ZERO).await.unwrap().is_none(), "held by the spawned task's guard");
    tx.send(()).unwrap();
    assert_eq!(worker.await.unwrap().unwrap(), Unlocked::Last);
    let next = lock.try_acquire(Duration::ZERO).await.unwrap().expect("free again");
    next.unlock().await.unwrap();
    locks.close().await;
}

#[test]
fn the_blocking_api_excludes_threads_sharing_one_lock() {
    let s = Server::start();
    let locks = redis_lockmod_client::blocking::LockClient::new(s.client()).unwrap();
    let lock = Arc::new(locks.lock("threads"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (lock, client) = (lock.clone(), s.client());
            std::thread::spawn(move || {
                let mut c = client.get_connection().unwrap();
                let mut overlaps = 0;
                for _ in 0..10 {
                    let g = lock.acquire().unwrap();
                    let set: Option<String> = redis::cmd("SET").arg("holder").arg(t).arg("NX").query(&mut c).unwrap();
                    overlaps += i64::from(set.is_none());
                    std::thread::sleep(Duration::from_millis(2));
                    redis::cmd("DEL").arg("holder").exec(&mut c).unwrap();
                    g.unlock().unwrap();
                }
                overlaps
            })
        })
        .collect();
    let overlaps: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(overlaps, 0);
    let me = locks.lock("threads").reentrant();
    let a = me.acquire().unwrap();
    let b = me.acquire().unwrap();
    assert_eq!(a.hold_count().unwrap(), 2);
    b.unlock().unwrap();
    a.unlock().unwrap();
    locks.close().unwrap();
}
