//! Redis Cluster and Sentinel: commands go to the primary of the key (its slot's, or the one
//! Sentinel names), follow a failover (`MOVED`, `READONLY`: not run, so sent again after the
//! topology is read again), and wait for the replicas after grants and releases (`WAIT`): a
//! grant no replica acknowledged is given back and reported as `NoSyncedReplicas`.

mod support;

use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelServerType};
use redis_lockmod_client::{Error, LockClient, RateType, Servers};
use support::sentinel::{Cluster, Sentinels, SERVICE};
use support::wait_until;

fn role(c: &mut redis::Connection) -> String {
    redis::cmd("INFO").arg("replication").query(c).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_work_on_a_cluster_across_slots_and_a_failover() {
    let cluster = tokio::task::spawn_blocking(Cluster::start).await.unwrap();
    let locks = LockClient::builder().build(Servers::cluster(cluster.urls()).unwrap()).unwrap();
    let names = ["alpha", "beta", "gamma", "delta", "{alpha}:x"];
    let mut guards = Vec::new();
    for n in names {
        guards.push(locks.lock(n).fenced().acquire().await.unwrap());
    }
    for (n, g) in names.iter().zip(&guards) {
        assert_eq!(g.token(), Some(1), "{n}");
        let port = cluster.primary_for(n);
        let holds: i64 = redis::cmd("LOCK.HOLDS").arg(*n).arg(g.owner()).query(&mut cluster.conn(port)).unwrap();
        assert_eq!(holds, 1, "{n} is on the primary of its slot");
    }
    // A waiter parks on the slot's primary and is handed the lock.
    let waiter = locks.lock("alpha");
    let w = tokio::spawn(async move { waiter.acquire().await.map(|g| g.token()) });
    let port = cluster.primary_for("alpha");
    wait_until(Duration::from_secs(5), "parked", || {
        support::info_field(&mut cluster.conn(port), "clients", "blocked_clients") == 1
    });
    for g in guards {
        g.unlock().await.unwrap();
    }
    assert_eq!(w.await.unwrap().unwrap(), None);
    // A manual failover of alpha's shard: the library's slot map is stale, MOVED says so.
    let replica = cluster
        .ports
        .iter()
        .copied()
        .find(|p| role(&mut cluster.conn(*p)).contains(&format!("master_port:{port}")))
        .expect("alpha's primary has a replica");
    redis::cmd("CLUSTER").arg("FAILOVER").exec(&mut cluster.conn(replica)).unwrap();
    wait_until(Duration::from_secs(20), "the replica promoted", || {
        role(&mut cluster.conn(replica)).contains("role:master")
    });
    let g = locks.lock("alpha").fenced().acquire().await.unwrap();
    // The failover started fencing era 1 (issue 35): the next token is above every one before.
    assert_eq!(g.token(), Some((1 << 32) + 1), "the first token of the promoted primary's era");
    let holds: i64 = redis::cmd("LOCK.HOLDS").arg("alpha").arg(g.owner()).query(&mut cluster.conn(replica)).unwrap();
    assert_eq!(holds, 1, "granted by the new primary");
    g.unlock().await.unwrap();
    let sem = locks.semaphore("beta-sem");
    sem.try_set_permits(1, None).await.unwrap();
    sem.acquire(1).await.unwrap().release().await.unwrap();
    // A rate limiter's keys all lie in its name's slot, on that slot's primary.
    let limiter = locks.rate_limiter("gamma-rate");
    assert!(limiter.try_set_rate(RateType::PerClient, 2, Duration::from_secs(3600), None).await.unwrap());
    assert!(limiter.try_acquire(2, Duration::from_secs(1)).await.unwrap());
    assert!(!limiter.try_acquire(1, Duration::from_millis(50)).await.unwrap());
    let mut c = cluster.conn(cluster.primary_for("gamma-rate"));
    let value: String = redis::cmd("GET").arg(format!("{{gamma-rate}}:value:{}", locks.id())).query(&mut c).unwrap();
    assert_eq!(value, "0");
    locks.close().await;
    tokio::task::spawn_blocking(move || drop(cluster)).await.unwrap();
}

// redis-rs takes the service name as a String, or as `impl AsRef<str>` when its rustls feature
// is on (the bench's rslock turns it on when the workspace builds together).
#[allow(clippy::unnecessary_to_owned)]
fn sentinel_client(s: &Sentinels) -> SentinelClient {
    SentinelClient::build(vec![s.url()], SERVICE.to_string(), None, SentinelServerType::Master).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_names_the_primary_and_replicas_are_waited_for() {
    let s = tokio::task::spawn_blocking(Sentinels::start).await.unwrap();
    let locks = LockClient::builder().build(Servers::Sentinel(sentinel_client(&s))).unwrap();
    let lock = locks.lock("orders");
    let g = lock.acquire().await.unwrap();
    let holds: i64 = redis::cmd("LOCK.HOLDS").arg("orders").arg(g.owner()).query(&mut s.replica.conn()).unwrap();
    assert_eq!(holds, 1, "WAIT after the grant: the replica has it when acquire returns");
    g.unlock().await.unwrap();
    let exists: i64 = redis::cmd("EXISTS").arg("orders").query(&mut s.replica.conn()).unwrap();
    assert_eq!(exists, 0, "and the release");
    // The replica stops acknowledging: the grant is given back.
    let sleeper = s.replica.sleep(2.0);
    let r = locks.lock("orders").acquire().await;
    assert!(matches!(&r, Err(Error::NoSyncedReplicas { replicas: 1, synced: 0, .. })), "{r:?}");
    let exists: i64 = redis::cmd("EXISTS").arg("orders").query(&mut s.primary.conn()).unwrap();
    assert_eq!(exists, 0, "the grant was given back");
    tokio::task::spawn_blocking(move || sleeper.join().unwrap()).await.unwrap();
    // A semaphore's permits too; a release stays applied and says it was not synced.
    let sem = locks.semaphore("pool");
    assert!(sem.try_set_permits(1, None).await.unwrap());
    let held = sem.acquire(1).await.unwrap();
    // Three waits of 1 s each below: the replica sleeps past them all.
    let sleeper = s.replica.sleep(4.0);
    let r = sem.try_acquire(1, Duration::ZERO).await;
    assert!(matches!(r, Ok(None)), "a refusal stays a refusal: {:?}", r.map(|g| g.map(|g| g.permits())));
    let r = held.release().await;
    assert!(matches!(&r, Err(Error::NoSyncedReplicas { replicas: 1, .. })), "{r:?}");
    let avail: i64 = redis::cmd("GET").arg("pool").query(&mut s.primary.conn()).unwrap();
    assert_eq!(avail, 1, "the release stays applied");
    let r = sem.try_acquire(1, Duration::ZERO).await;
    assert!(matches!(&r, Err(Error::NoSyncedReplicas { .. })), "{:?}", r.map(|g| g.map(|g| g.permits())));
    let avail: i64 = redis::cmd("GET").arg("pool").query(&mut s.primary.conn()).unwrap();
    assert_eq!(avail, 1, "the permit taken was given back");
    tokio::task::spawn_blocking(move || sleeper.join().unwrap()).await.unwrap();
    // Off: nothing is waited for.
    let unsynced = LockClient::builder().sync_replicas(false).build(Servers::Sentinel(sentinel_client(&s))).unwrap();
    let sleeper = s.replica.sleep(1.0);
    let g = unsynced.lock("orders").acquire().await.unwrap();
    g.unlock().await.unwrap();
    tokio::task::spawn_blocking(move || sleeper.join().unwrap()).await.unwrap();
    // A failover: the old primary answers READONLY, the library asks Sentinel again.
    redis::cmd("SENTINEL")
        .arg("FAILOVER")
        .arg(SERVICE)
        .exec(&mut redis::Client::open(s.url()).unwrap().get_connection().unwrap())
        .unwrap();
    wait_until(Duration::from_secs(30), "the replica promoted, the old primary its replica", || {
        let r = role(&mut s.replica.conn());
        r.contains("role:master") && r.contains("state=online")
    });
    let g = locks.lock("after").acquire().await.unwrap();
    let holds: i64 = redis::cmd("LOCK.HOLDS").arg("after").arg(g.owner()).query(&mut s.replica.conn()).unwrap();
    assert_eq!(holds, 1, "granted by the new primary");
    drop(g);
    locks.close().await;
    unsynced.close().await;
    tokio::task::spawn_blocking(move || drop(s)).await.unwrap();
}
