//! Replies that never arrive: the server is kept busy with `DEBUG SLEEP` from another
//! connection while the client's command timeout is shorter. Each test first uses the lock once,
//! so that its request goes out on an established connection. A grant whose reply is lost is
//! found with `*.HOLDS` (after `CLIENT KILL ID` of its connection) and counted as held; an
//! unlock whose reply is lost is sent again with the same `LATCH` and is not applied twice.

mod support;

use std::time::Duration;

use redis_lockmod_client::{Error, LockClient, Servers, Unlocked};
use support::{hgetall, Server};

fn fast(s: &Server) -> LockClient {
    LockClient::builder().command_timeout(Duration::from_millis(250)).build(Servers::Standalone(s.client())).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_acquire_whose_reply_is_lost_is_recognised_as_held() {
    let s = Server::start();
    let locks = fast(&s);
    let lock = locks.lock("lost-acquire").with_lease(Duration::from_secs(30));
    lock.try_acquire(Duration::ZERO).await.unwrap().unwrap().unlock().await.unwrap();
    let sleeper = s.sleep(1.2);
    let g = lock.try_acquire(Duration::ZERO).await.unwrap().expect("settled as granted");
    sleeper.join().unwrap();
    assert_eq!(
        hgetall(&mut s.conn(), "lost-acquire"),
        vec![(g.owner().to_string(), "1".to_string())],
        "granted once, never re-sent"
    );
    assert_eq!(g.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert_eq!(support::pttl(&mut s.conn(), "lost-acquire"), -2);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_fenced_grant_still_knows_its_token() {
    let s = Server::start();
    let locks = fast(&s);
    let lock = locks.read_write_lock("lost-fenced").reentrant().write().fenced().with_lease(Duration::from_secs(30));
    let first = lock.try_acquire(Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(first.token(), Some(1));
    let sleeper = s.sleep(1.2);
    let second = lock.try_acquire(Duration::ZERO).await.unwrap().expect("settled as granted");
    sleeper.join().unwrap();
    assert_eq!(second.token(), Some(2));
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    second.unlock().await.unwrap();
    first.unlock().await.unwrap();
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_acquire_whose_reply_is_lost_is_an_error_and_takes_nothing() {
    let s = Server::start();
    let locks = fast(&s);
    let holder = locks.lock("lost-refused").acquire().await.unwrap();
    let lock = locks.lock("lost-refused");
    assert!(lock.try_acquire(Duration::ZERO).await.unwrap().is_none());
    let sleeper = s.sleep(1.2);
    let r = lock.try_acquire(Duration::ZERO).await;
    sleeper.join().unwrap();
    assert!(matches!(&r, Err(Error::Redis(e)) if e.to_string().contains("settled: not granted")), "{r:?}");
    assert_eq!(hgetall(&mut s.conn(), "lost-refused"), vec![(holder.owner().to_string(), "1".to_string())]);
    holder.unlock().await.unwrap();
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_unlock_reply_is_not_applied_twice() {
    let s = Server::start();
    let locks = fast(&s);
    let lock = locks.fair_lock("lost-unlock").reentrant().with_lease(Duration::from_secs(30));
    let a = lock.acquire().await.unwrap();
    let b = lock.acquire().await.unwrap();
    let sleeper = s.sleep(1.2);
    assert_eq!(b.unlock().await.unwrap(), Unlocked::HoldsLeft);
    sleeper.join().unwrap();
    assert_eq!(
        hgetall(&mut s.conn(), "lost-unlock"),
        vec![(a.owner().to_string(), "1".to_string())],
        "one hold released, not two"
    );
    assert_eq!(a.unlock().await.unwrap(), Unlocked::Last);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_wait_whose_reply_is_lost_is_killed_then_settled() {
    let s = Server::start();
    let locks = fast(&s);
    let holder = locks.lock("lost-wait").acquire().await.unwrap();
    let lock = locks.lock("lost-wait");
    // The wait's reply is due 250 ms after its 100 ms BLOCK; the server is asleep then.
    let waiter = tokio::spawn(async move { lock.try_acquire(Duration::from_millis(100)).await.map(|g| g.is_some()) });
    s.wait_blocked(1);
    let sleeper = s.sleep(1.0);
    let r = waiter.await.unwrap();
    sleeper.join().unwrap();
    assert!(matches!(&r, Ok(false) | Err(Error::Redis(_))), "{r:?}");
    assert_eq!(s.blocked(), 0);
    holder.unlock().await.unwrap();
    assert_eq!(support::pttl(&mut s.conn(), "lost-wait"), -2, "nothing was granted to the killed wait");
    locks.close().await;
}

/// The id of the connection parked in `cmd` (`CLIENT LIST`), if one is.
fn parked_client(s: &Server, cmd: &str) -> Option<i64> {
    let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut s.conn()).unwrap();
    let line = list.lines().find(|l| l.contains(&format!(" cmd={cmd} ")) && l.contains(" flags=b "))?;
    line.split(' ').find_map(|f| f.strip_prefix("id=")).and_then(|v| v.parse().ok())
}

/// As after a failover: the wait's connection breaks and the barrier cannot end it (here the
/// ACL refuses `CLIENT ID` and `CLIENT KILL`; after a failover its node is gone). The owner's
/// hold count says not granted, so the wait is a new wait for the time left (docs/clients.md,
/// "Sentinel"), as in the Python and Node libraries: never a blind re-send, and no error while
/// time is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_wait_settled_as_not_granted_waits_again_for_the_time_left() {
    let s = Server::start();
    let mut c = s.conn();
    redis::cmd("ACL")
        .arg(&["SETUSER", "nokill", "on", "nopass", "~*", "&*", "+@all", "-client|id", "-client|kill"][..])
        .exec(&mut c)
        .unwrap();
    let client = redis::Client::open(format!("redis://nokill:any@127.0.0.1:{}/", s.port)).unwrap();
    let locks = LockClient::new(client).unwrap();
    let holder = locks.lock("rewait").acquire().await.unwrap();
    let lock = locks.lock("rewait");
    let waiter = tokio::spawn(async move { lock.try_acquire(Duration::from_secs(30)).await });
    s.wait_blocked(1);
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut c).unwrap();
    let id = parked_client(&s, "lock.acquire").expect("parked");
    redis::cmd("CLIENT").arg("KILL").arg("ID").arg(id).exec(&mut c).unwrap();
    // Seen parked (Valkey counts a parked command's call only when it ends).
    support::wait_until(Duration::from_secs(10), "a new wait, on a connection of its own", || {
        parked_client(&s, "lock.acquire").is_some_and(|again| again != id)
    });
    assert_eq!(s.blocked(), 1);
    assert!(support::command_calls(&mut c, "LOCK.HOLDS") >= 1, "settled by asking first");
    let who: String = redis::cmd("CLIENT").arg("LIST").query(&mut c).unwrap();
    assert!(who.lines().any(|l| l.contains(" user=nokill ") && l.contains(" flags=b ")), "parked as nokill: {who}");
    holder.unlock().await.unwrap();
    let guard = waiter.await.unwrap().expect("no error while time is left").expect("granted to the new wait");
    assert_eq!(hgetall(&mut c, "rewait"), vec![(guard.owner().to_string(), "1".to_string())], "one hold");
    assert_eq!(guard.unlock().await.unwrap(), Unlocked::Last);
    locks.close().await;
}
