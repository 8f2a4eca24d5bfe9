//! No garbage per unlock (issue 34): every unlock carries `LATCH` (so a re-sent unlock is
//! answered, not applied twice), and once its reply came on its first send the latch key
//! (`redisson_unlock_latch:{name}:<id>`) is deleted, as Redisson deletes its own: the key count
//! stays flat over 10,000 lock/unlock cycles, and nothing is left after `close`.

mod support;

use std::time::Duration;

use redis_lockmod_client::LockClient;
use support::{command_calls, Server};

fn latches(c: &mut redis::Connection) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS").arg("redisson_unlock_latch:*").query(c).unwrap();
    keys.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_latch_count_stays_flat_over_ten_thousand_cycles_and_none_is_left() {
    let s = Server::start();
    let locks = LockClient::new(s.client()).unwrap();
    let mut c = s.conn();
    let plain = locks.lock("cycles");
    let fair = locks.fair_lock("cycles-fair");
    let rw = locks.read_write_lock("cycles-rw");
    let mut most = 0;
    for i in 0..10_000u32 {
        let g = match i % 10 {
            7 => fair.acquire().await.unwrap(),
            8 => rw.write().acquire().await.unwrap(),
            9 => rw.read().acquire().await.unwrap(),
            _ => plain.acquire().await.unwrap(),
        };
        if i % 1000 == 500 {
            // A dropped guard's release deletes its latch too.
            drop(g);
        } else {
            g.unlock().await.unwrap();
        }
        if i % 250 == 0 {
            most = most.max(latches(&mut c));
        }
    }
    assert!(most <= 2, "at most the last unlock's latch waits for the next request: {most}");
    assert_eq!(
        command_calls(&mut c, "LOCK.UNLOCK")
            + command_calls(&mut c, "FAIRLOCK.UNLOCK")
            + command_calls(&mut c, "RWLOCK.UNLOCK"),
        10_000
    );
    locks.close().await;
    assert_eq!(latches(&mut c), 0, "close sends the deletions still waiting");
    let left: i64 = redis::cmd("DBSIZE").query(&mut c).unwrap();
    assert_eq!(left, 0, "nothing at all is left");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_stays_while_its_unlock_may_be_sent_again() {
    let s = Server::start();
    // A short command timeout: the unlock's reply is lost while the server sleeps, and the
    // same latched request is sent again: the latch must outlive every copy.
    let locks = LockClient::builder()
        .command_timeout(Duration::from_millis(250))
        .build(redis_lockmod_client::Servers::Standalone(s.client()))
        .unwrap();
    let lock = locks.lock("resent").reentrant().with_lease(Duration::from_secs(30));
    let a = lock.acquire().await.unwrap();
    let b = lock.acquire().await.unwrap();
    let sleeper = s.sleep(1.2);
    b.unlock().await.unwrap();
    sleeper.join().unwrap();
    let mut c = s.conn();
    assert_eq!(latches(&mut c), 1, "sent more than once: its latch is left to expire");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(redis::cmd("KEYS").arg("redisson_unlock_latch:*").query::<Vec<String>>(&mut c).unwrap()[0].clone())
        .query(&mut c)
        .unwrap();
    assert!(ttl > 0, "with its expiry: {ttl}");
    a.unlock().await.unwrap();
    locks.close().await;
    assert_eq!(latches(&mut c), 1, "only the re-sent one");
}
