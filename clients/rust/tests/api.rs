//! The public API as the Rust API guidelines ask (issue 34): every public type is `Debug`;
//! guards are owned (`Send + Sync + 'static`: they move into spawned tasks); the errors are
//! `std::error::Error + Send + Sync + 'static`; every future is `Send`. (The crate also denies
//! `missing_debug_implementations`.) No server needed: nothing here connects.

use std::fmt::Debug;
use std::time::Duration;

use redis_lockmod_client::{LockClient, Servers};

fn debug<T: Debug>() {}
fn owned<T: Send + Sync + 'static>() {}
fn error<T: std::error::Error + Send + Sync + 'static>() {}
fn send<T: Send>(_: T) {}

#[test]
fn every_public_type_is_debug() {
    use redis_lockmod_client::*;
    debug::<LockClient>();
    debug::<LockClientBuilder>();
    debug::<Servers>();
    debug::<Error>();
    debug::<Unlocked>();
    debug::<Lock>();
    debug::<FairLock>();
    debug::<ReadWriteLock>();
    debug::<LockGuard>();
    debug::<Semaphore>();
    debug::<SemaphoreGuard>();
    debug::<PermitExpirableSemaphore>();
    debug::<PermitGuard>();
    debug::<CountDownLatch>();
    debug::<RateLimiter>();
    debug::<RateLimiterConfig>();
    debug::<RateType>();
    debug::<SetRate>();
    debug::<blocking::LockClient>();
    debug::<blocking::Lock>();
    debug::<blocking::ReadWriteLock>();
    debug::<blocking::LockGuard>();
    debug::<blocking::Semaphore>();
    debug::<blocking::SemaphoreGuard>();
    debug::<blocking::PermitExpirableSemaphore>();
    debug::<blocking::PermitGuard>();
    debug::<blocking::CountDownLatch>();
    debug::<blocking::RateLimiter>();
    owned::<LockGuard>();
    owned::<SemaphoreGuard>();
    owned::<PermitGuard>();
    owned::<Lock>();
    owned::<LockClient>();
    error::<Error>();
}

#[tokio::test]
async fn servers_say_where_and_every_future_is_send() {
    let client = redis::Client::open("redis://127.0.0.1:6399/").unwrap();
    let shown = format!("{:?}", Servers::Standalone(client.clone()));
    assert!(shown.contains("6399"), "{shown}");
    let shown = format!("{:?}", Servers::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]).unwrap());
    assert!(shown.contains("7000") && shown.contains("7001"), "{shown}");
    let locks = LockClient::new(client).unwrap();
    let lock = locks.lock("x");
    send(lock.acquire());
    send(lock.try_acquire(Duration::ZERO));
    send(lock.force_unlock());
    let sem = locks.semaphore("s");
    send(sem.acquire(1));
    send(locks.permit_expirable_semaphore("p").acquire(1));
    send(locks.count_down_latch("l").wait(None));
    send(locks.rate_limiter("r").acquire(1));
    send(locks.close());
}
