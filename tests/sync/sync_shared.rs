//! One Redisson client (its Lua bodies, sent by `EVALSHA` exactly as Redisson sends them) and
//! one native client (`SEMAPHORE.*`, `PSEMAPHORE.*`, `COUNTDOWN.*`) sharing each
//! synchronizer: the state and the messages are what the other side expects. Run with the
//! bodies as Lua (`off`) and accelerated (`native`): the answers must not change.

use crate::common;

use common::redisson::{Raw, RawConn};
use common::sync_calls::{call, latch_channel, role, semaphore_channel, timeouts, Choices, NO_LEASE};
use common::{msgs, Server};

/// The newest release's body of a role (from the shared scripts).
fn sha(scripts: &common::redisson::Scripts, want: &str) -> String {
    scripts
        .bodies
        .iter()
        .filter(|b| b.releases.iter().any(|r| r == "HEAD"))
        .find(|b| format!("{:?}", role(&b.sha)).starts_with(want))
        .unwrap_or_else(|| panic!("no HEAD body for {want}"))
        .sha
        .clone()
}

fn choices(permits: i64, ids: Vec<[u8; 16]>, until: &str) -> Choices {
    Choices {
        permits,
        ids,
        until: until.to_string(),
        now: common::diff::now_ms(),
        ttl_ms: 30_000,
        publish: "PUBLISH".into(),
    }
}

fn run(mode: &str) {
    let scripts = common::sync_pair::load();
    let server = Server::start_with(true, &["--lockmod.redisson-scripts", mode]);
    let mut c = server.conn();
    for b in &scripts.bodies {
        let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(&b.text).query(&mut c).expect("SCRIPT LOAD");
    }
    let sub = server.subscriber();
    let mut raw = RawConn::open(&server, false);
    let mut redisson = |sha: &str, name: &str, ch: &Choices| raw.call(&call(sha, name, ch).evalsha());
    let int = |c: &mut redis::Connection, args: &[&str]| common::int(&common::ok(c, args));

    // Semaphore: Redisson sets and takes, the native client releases and adds.
    assert_eq!(redisson(&sha(&scripts, "TrySet {"), "s", &choices(2, vec![], "")), Raw::Line(b':', "1".into()));
    assert_eq!(redisson(&sha(&scripts, "SemAcquire"), "s", &choices(2, vec![], "")), Raw::Line(b':', "1".into()));
    assert_eq!(int(&mut c, &["SEMAPHORE.RELEASE", "s", "1"]), 1);
    assert_eq!(int(&mut c, &["SEMAPHORE.ADDPERMITS", "s", "2"]), 3);
    assert_eq!(redisson(&sha(&scripts, "SemAcquire"), "s", &choices(3, vec![], "")), Raw::Line(b':', "1".into()));
    assert_eq!(int(&mut c, &["SEMAPHORE.AVAILABLE", "s"]), 0);
    // A native client parked for 2 is served by Redisson's release of 2.
    let waiter = {
        let mut w = server.conn();
        std::thread::spawn(move || common::int(&common::ok(&mut w, &["SEMAPHORE.ACQUIRE", "s", "2", "BLOCK", "5000"])))
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(redisson(&sha(&scripts, "SemRelease"), "s", &choices(2, vec![], "")), Raw::Bulk(b'$', None));
    assert_eq!(waiter.join().expect("waiter"), 1, "the parked native client got Redisson's permits");
    let ch = semaphore_channel("s");
    assert_eq!(sub.take(), msgs(&[(&ch, "2"), (&ch, "1"), (&ch, "3"), (&ch, "2")]));

    // Expirable semaphore: the native client takes a permit, Redisson sees it held and
    // releases it by id; Redisson takes one, the native client releases it by its hex id.
    assert_eq!(int(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "1"]), 1);
    let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(1).arg(30_000).query(&mut c).expect("acquire");
    let id: Vec<u8> = (0..16).map(|i| u8::from_str_radix(&ids[0][2 * i..2 * i + 2], 16).expect("hex")).collect();
    let id: [u8; 16] = id.try_into().expect("16 bytes");
    assert_eq!(redisson(&sha(&scripts, "PAcquired"), "p", &choices(0, vec![], "")), Raw::Line(b':', "1".into()));
    assert_eq!(redisson(&sha(&scripts, "PReleaseOne"), "p", &choices(0, vec![id], "")), Raw::Line(b':', "1".into()));
    let mine = [0xab; 16];
    let acquire = sha(&scripts, "PAcquireIds");
    assert_eq!(redisson(&acquire, "p", &choices(0, vec![mine], NO_LEASE)), Raw::Bulk(b'$', Some(b"OK".to_vec())));
    assert_eq!(int(&mut c, &["PSEMAPHORE.ACQUIRED", "p"]), 1);
    assert_eq!(int(&mut c, &["PSEMAPHORE.RELEASE", "p", &"ab".repeat(16)]), 1);
    let z: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg(timeouts("p")).arg(0).arg(-1).query(&mut c).expect("ZRANGE");
    assert!(z.is_empty(), "no permit held");
    let ch = semaphore_channel("p");
    assert_eq!(sub.take(), msgs(&[(&ch, "1"), (&ch, "1"), (&ch, "1")]));

    // Latch: Redisson sets the count, the native client counts down, Redisson's last
    // count-down opens it for a native client parked in AWAIT.
    assert_eq!(redisson(&sha(&scripts, "TrySetCount"), "l", &choices(2, vec![], "")), Raw::Line(b':', "1".into()));
    assert_eq!(int(&mut c, &["COUNTDOWN.DECR", "l"]), 1);
    let waiter = {
        let mut w = server.conn();
        std::thread::spawn(move || common::int(&common::ok(&mut w, &["COUNTDOWN.AWAIT", "l", "BLOCK", "5000"])))
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(redisson(&sha(&scripts, "CountDown"), "l", &choices(0, vec![], "")), Raw::Bulk(b'$', None));
    assert_eq!(waiter.join().expect("waiter"), 1, "Redisson's count-down opened the latch");
    assert_eq!(int(&mut c, &["EXISTS", "l"]), 0);
    let lch = latch_channel("l");
    assert_eq!(sub.take(), msgs(&[(&lch, "1"), (&lch, "0")]));
}

#[test]
fn a_redisson_client_and_a_native_one_share_each_synchronizer_with_the_bodies_as_lua() {
    run("off");
}

#[test]
fn a_redisson_client_and_a_native_one_share_each_synchronizer_with_the_bodies_native() {
    run("native");
}
