//! The rate limiter (Redisson's `RRateLimiter`, `RATELIMITER.*`) against a real server:
//! Redisson's hash, value key and grant zset (member bytes, scores on the server's clock),
//! windows per client id, a window shared with Redisson's own body, waits parked in the server
//! in arrival order, a lost reply that is never sent again, and the blocking API.

mod support;

use std::time::{Duration, Instant};

use redis_lockmod_client::{Error, LockClient, RateLimiterConfig, RateType, Servers, SetRate};
use support::{hgetall, pttl, Server};

const HOUR: Duration = Duration::from_secs(3600);

fn server_ms(c: &mut redis::Connection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query(c).unwrap();
    s * 1000 + us / 1000
}

/// The permits of each grant in a zset, read from Redisson's member: a length byte, the
/// random bytes, the permits (4 bytes little-endian).
fn grants(c: &mut redis::Connection, key: &str) -> Vec<u32> {
    let members: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).query(c).unwrap();
    members
        .iter()
        .map(|m| {
            assert_eq!(m.len(), 1 + m[0] as usize + 4, "struct.pack('Bc0I', #random, random, permits): {m:?}");
            assert_eq!(m[0], 16, "16 random bytes, as Redisson 3.21+");
            u32::from_le_bytes(m[m.len() - 4..].try_into().unwrap())
        })
        .collect()
}

fn scores(c: &mut redis::Connection, key: &str) -> Vec<i64> {
    let v: Vec<(Vec<u8>, i64)> = redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(c).unwrap();
    v.into_iter().map(|(_, s)| s).collect()
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = v.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_checked_before_anything_is_sent() {
    // Nothing listens there: every call below fails before it connects.
    let locks = LockClient::new(redis::Client::open("redis://127.0.0.1:1/").unwrap()).unwrap();
    let limiter = locks.rate_limiter("api");
    let invalid = |r: Result<bool, Error>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(invalid(limiter.try_acquire(0, Duration::ZERO).await));
    assert!(invalid(limiter.try_set_rate(RateType::Overall, 0, HOUR, None).await));
    assert!(invalid(limiter.try_set_rate(RateType::Overall, 1, Duration::ZERO, None).await));
    let short = Some(Duration::from_secs(1));
    assert!(invalid(limiter.try_set_rate(RateType::Overall, 1, HOUR, short).await), "keep-alive below the interval");
    assert!(invalid(
        limiter.set_rate(RateType::Overall, 1, HOUR, SetRate { keep_alive: short, ..SetRate::default() }).await
    ));
    assert!(matches!(limiter.release(0).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(locks.rate_limiter("").available_permits().await, Err(Error::InvalidArgument(_))));
    assert!(matches!(limiter.clone().with_client_id("").get_config().await, Err(Error::InvalidArgument(_))));
    assert_eq!(limiter.client_id(), locks.id(), "the client's uuid, as Redisson's instance id");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limiter_grants_up_to_its_rate_in_redissons_keys() {
    let s = Server::start();
    let mut c = s.conn();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("api");
    assert_eq!(limiter.get_config().await.unwrap(), None);
    let r = limiter.try_acquire(1, Duration::ZERO).await;
    assert!(matches!(&r, Err(Error::Redis(e)) if e.to_string().contains("RateLimiter is not initialized")), "{r:?}");
    assert!(limiter.try_set_rate(RateType::Overall, 3, Duration::from_secs(60), None).await.unwrap());
    assert!(!limiter.try_set_rate(RateType::Overall, 99, Duration::from_secs(1), None).await.unwrap(), "set once");
    assert_eq!(
        hgetall(&mut c, "api"),
        pairs(&[("rate", "3"), ("interval", "60000"), ("type", "0"), ("keepAliveTime", "0")])
    );
    let want = RateLimiterConfig {
        rate_type: RateType::Overall,
        rate: 3,
        interval: Duration::from_secs(60),
        keep_alive: None,
    };
    assert_eq!(limiter.get_config().await.unwrap(), Some(want));
    let before = server_ms(&mut c);
    assert!(limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    limiter.acquire(1).await.unwrap();
    assert!(!limiter.try_acquire(1, Duration::ZERO).await.unwrap(), "the window is full");
    let after = server_ms(&mut c);
    assert_eq!(get(&mut c, "{api}:value").as_deref(), Some("0"));
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    let mut got = grants(&mut c, "{api}:permits");
    got.sort();
    assert!(got == [1, 2] || got == [3], "one member per grant (one per ms): {got:?}");
    assert!(
        scores(&mut c, "{api}:permits").iter().all(|t| (before..=after).contains(t)),
        "scored by the server's clock"
    );
    let r = limiter.try_acquire(4, Duration::ZERO).await;
    assert!(matches!(&r, Err(Error::Redis(e)) if e.to_string().contains("cannot exceed defined rate")), "{r:?}");
    assert_eq!(limiter.release(2).await.unwrap(), 2, "given back: taken off the newest grants");
    assert_eq!(grants(&mut c, "{api}:permits").iter().sum::<u32>(), 1);
    assert_eq!(get(&mut c, "{api}:value").as_deref(), Some("2"));
    assert_eq!(limiter.release(5).await.unwrap(), 3, "never above the rate");
    let n: i64 = redis::cmd("ZCARD").arg("{api}:permits").query(&mut c).unwrap();
    assert_eq!(n, 0);

    let kept = locks.rate_limiter("kept");
    let keep = Some(Duration::from_secs(30));
    assert!(kept.try_set_rate(RateType::Overall, 1, Duration::from_secs(1), keep).await.unwrap());
    assert!(kept.try_acquire(1, Duration::ZERO).await.unwrap());
    for key in ["kept", "{kept}:value", "{kept}:permits"] {
        let t = pttl(&mut c, key);
        assert!(29_000 < t && t <= 30_000, "{key} lives keepAliveTime after its last use: {t}");
    }
    assert_eq!(kept.get_config().await.unwrap().and_then(|c| c.keep_alive), keep);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_client_windows_are_the_client_ids() {
    let s = Server::start();
    let mut c = s.conn();
    let locks = LockClient::new(s.client()).unwrap();
    let other = LockClient::new(s.client()).unwrap();
    let mine = locks.rate_limiter("pc");
    assert_eq!(
        mine.client_id(),
        locks.lock("any").reentrant().owner().unwrap().rsplit_once(':').unwrap().0,
        "the owner names' uuid"
    );
    let theirs = other.rate_limiter("pc");
    assert_ne!(theirs.client_id(), mine.client_id());
    assert!(mine.try_set_rate(RateType::PerClient, 2, HOUR, None).await.unwrap());
    assert!(mine.try_acquire(2, Duration::ZERO).await.unwrap());
    assert!(!locks.rate_limiter("pc").try_acquire(1, Duration::ZERO).await.unwrap(), "one window per client id");
    assert!(theirs.try_acquire(2, Duration::ZERO).await.unwrap(), "another client id: another window");
    let (m, t) = (mine.client_id().to_string(), theirs.client_id().to_string());
    assert_eq!(get(&mut c, &format!("{{pc}}:value:{m}")).as_deref(), Some("0"));
    assert_eq!(get(&mut c, &format!("{{pc}}:value:{t}")).as_deref(), Some("0"));
    assert_eq!(grants(&mut c, &format!("{{pc}}:permits:{m}")).iter().sum::<u32>(), 2);
    let n: i64 = redis::cmd("EXISTS").arg("{pc}:value").arg("{pc}:permits").query(&mut c).unwrap();
    assert_eq!(n, 0, "no overall window");
    let java = mine.clone().with_client_id("java-instance-id");
    assert_eq!(java.available_permits().await.unwrap(), 2);
    assert_eq!(get(&mut c, "{pc}:value:java-instance-id").as_deref(), Some("2"));
    locks.close().await;
    other.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_is_shared_with_redissons_own_body_by_client_id() {
    let s = Server::start();
    let mut c = s.conn();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("shared");
    limiter.try_set_rate(RateType::PerClient, 3, Duration::from_secs(60), None).await.unwrap();
    let id = limiter.client_id().to_string();
    let (value, permits) = (format!("{{shared}}:value:{id}"), format!("{{shared}}:permits:{id}"));
    let body = support::redisson_ratelimiter_body(support::REDISSON_TRY_ACQUIRE);
    let java = |c: &mut redis::Connection, n: u32| -> Option<i64> {
        let now = server_ms(c);
        let mut eval = redis::cmd("EVAL");
        eval.arg(&body).arg(5).arg("shared").arg("{shared}:value").arg(&value).arg("{shared}:permits").arg(&permits);
        eval.arg(n).arg(now).arg(rand::random::<[u8; 16]>().to_vec()).query(c).unwrap()
    };
    // A Java client whose instance id is this client's uuid takes 2 of the window.
    assert_eq!(java(&mut c, 2), None);
    assert_eq!(limiter.available_permits().await.unwrap(), 1);
    assert!(!limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    assert!(limiter.try_acquire(1, Duration::ZERO).await.unwrap());
    let wait = java(&mut c, 1).expect("the Java client sees the library's grant");
    assert!(59_000 < wait && wait <= 60_003, "{wait}");
    assert_eq!(grants(&mut c, &permits).iter().sum::<u32>(), 3, "one zset for both");
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_rate_starts_afresh_or_keeps_the_window() {
    let s = Server::start();
    let mut c = s.conn();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("reset");
    let xx = SetRate { xx: true, ..SetRate::default() };
    assert!(!limiter.set_rate(RateType::Overall, 5, Duration::from_secs(1), xx).await.unwrap(), "updateRate");
    let n: i64 = redis::cmd("EXISTS").arg("reset").query(&mut c).unwrap();
    assert_eq!(n, 0, "nothing written");
    assert!(limiter.set_rate(RateType::Overall, 10, HOUR, SetRate::default()).await.unwrap());
    assert!(limiter.try_acquire(4, Duration::ZERO).await.unwrap());
    let keep = SetRate { keep_state: true, xx: true, ..SetRate::default() };
    assert!(limiter.set_rate(RateType::Overall, 6, HOUR, keep).await.unwrap());
    let rate: String = redis::cmd("HGET").arg("reset").arg("rate").query(&mut c).unwrap();
    assert_eq!(rate, "6");
    assert_eq!(limiter.available_permits().await.unwrap(), 2, "the 4 granted still count");
    assert!(limiter.set_rate(RateType::Overall, 6, HOUR, SetRate::default()).await.unwrap());
    let n: i64 = redis::cmd("EXISTS").arg("{reset}:value").arg("{reset}:permits").query(&mut c).unwrap();
    assert_eq!(n, 0, "a fresh start");
    assert_eq!(limiter.available_permits().await.unwrap(), 6);
    let alive = SetRate { keep_alive: Some(Duration::from_secs(5000)), ..SetRate::default() };
    assert!(limiter.set_rate(RateType::PerClient, 6, HOUR, alive).await.unwrap());
    let t = pttl(&mut c, "reset");
    assert!(4_999_000 < t && t <= 5_000_000, "{t}");
    let config = limiter.get_config().await.unwrap().unwrap();
    assert_eq!((config.rate_type, config.keep_alive), (RateType::PerClient, alive.keep_alive));
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_acquire_parks_until_its_permits_fit_in_the_window() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("wait");
    limiter.try_set_rate(RateType::Overall, 1, Duration::from_millis(400), None).await.unwrap();
    assert!(limiter.try_acquire(1, Duration::ZERO).await.unwrap());
    let start = Instant::now();
    let waiter = tokio::spawn({
        let l = locks.rate_limiter("wait");
        async move { l.try_acquire(1, Duration::from_secs(10)).await }
    });
    tokio::task::block_in_place(|| s.wait_blocked(1));
    assert!(waiter.await.unwrap().unwrap());
    let took = start.elapsed();
    assert!(
        took > Duration::from_millis(250) && took < Duration::from_secs(5),
        "granted when the grant left: {took:?}"
    );
    assert_eq!(s.blocked(), 0);
    let start = Instant::now();
    assert!(!limiter.try_acquire(1, Duration::from_millis(100)).await.unwrap(), "full for 0.4 s");
    assert!(start.elapsed() >= Duration::from_millis(90));
    assert_eq!(s.blocked(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_are_served_in_arrival_order_and_a_release_wakes_them() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("fifo");
    limiter.try_set_rate(RateType::Overall, 2, HOUR, None).await.unwrap();
    assert!(limiter.try_acquire(2, Duration::ZERO).await.unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for (i, n) in [(0, 2u64), (1, 1)] {
        let l = locks.rate_limiter("fifo");
        let tx = tx.clone();
        tokio::spawn(async move {
            l.acquire(n).await.unwrap();
            tx.send(i).unwrap();
        });
        tokio::task::block_in_place(|| s.wait_blocked(i + 1));
    }
    limiter.release(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(rx.try_recv().is_err(), "1 permit must not overtake the waiter for 2");
    assert!(!limiter.try_acquire(1, Duration::ZERO).await.unwrap(), "nor a new caller while anyone waits");
    limiter.release(1).await.unwrap();
    assert_eq!(rx.recv().await, Some(0), "the head is served first");
    assert_eq!(s.blocked(), 1);
    limiter.release(1).await.unwrap();
    assert_eq!(rx.recv().await, Some(1));
    assert_eq!(limiter.available_permits().await.unwrap(), 0);
    locks.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_whose_reply_is_lost_is_never_sent_again() {
    let s = Server::start();
    let locks = LockClient::builder()
        .command_timeout(Duration::from_millis(250))
        .build(Servers::Standalone(s.client()))
        .unwrap();
    let limiter = locks.rate_limiter("lost");
    // Also opens the library's connection, so the acquire below goes out on it at once.
    limiter.try_set_rate(RateType::Overall, 10, HOUR, None).await.unwrap();
    redis::cmd("CONFIG").arg("RESETSTAT").exec(&mut s.conn()).unwrap();
    let sleeper = s.sleep(1.2);
    let r = limiter.try_acquire(3, Duration::ZERO).await;
    assert!(matches!(&r, Err(Error::StateUnknown { command, .. }) if command == "RATELIMITER.ACQUIRE"), "{r:?}");
    tokio::task::spawn_blocking(move || sleeper.join().unwrap()).await.unwrap();
    assert_eq!(support::command_calls(&mut s.conn(), "RATELIMITER.ACQUIRE"), 1, "run once, when the server woke");
    assert_eq!(limiter.available_permits().await.unwrap(), 7);
    locks.close().await;
}

#[test]
fn the_blocking_api_is_the_same_without_await() {
    let s = Server::start();
    let locks = redis_lockmod_client::blocking::LockClient::new(s.client()).unwrap();
    let limiter = locks.rate_limiter("sync");
    assert_eq!(limiter.client_id(), locks.id());
    assert!(limiter.try_set_rate(RateType::Overall, 2, HOUR, None).unwrap());
    limiter.acquire(1).unwrap();
    assert!(limiter.try_acquire(1, Duration::from_millis(10)).unwrap());
    assert!(!limiter.try_acquire(1, Duration::from_millis(10)).unwrap());
    assert_eq!(limiter.release(1).unwrap(), 1);
    assert_eq!(limiter.available_permits().unwrap(), 1);
    assert!(limiter.set_rate(RateType::Overall, 3, HOUR, SetRate { keep_state: true, ..SetRate::default() }).unwrap());
    assert_eq!(limiter.get_config().unwrap().map(|c| c.rate), Some(3));
    assert_eq!(limiter.clone().with_client_id("x").name(), "sync");
    locks.close().unwrap();
}
