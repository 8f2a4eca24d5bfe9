//! Module configs: `lockmod.pubsub` via CONFIG SET/GET and at load time; sharded messages
//! reach `SSUBSCRIBE` subscribers, on the primary and on a replica.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

/// A raw RESP2 connection subscribed with `SSUBSCRIBE` (the client crate's PubSub has no
/// sharded variant), collecting what arrives as text.
struct ShardSubscriber(TcpStream);

impl ShardSubscriber {
    fn start(s: &Server, channel: &str) -> ShardSubscriber {
        let mut t = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        t.set_read_timeout(Some(Duration::from_millis(100))).expect("timeout");
        let cmd = format!("*2\r\n$10\r\nSSUBSCRIBE\r\n${}\r\n{}\r\n", channel.len(), channel);
        t.write_all(cmd.as_bytes()).expect("write");
        let mut sub = ShardSubscriber(t);
        assert!(sub.wait_for("ssubscribe", Duration::from_secs(2)), "no SSUBSCRIBE confirmation");
        sub
    }

    /// Reads until `needle` appears in the stream or `timeout` passes.
    fn wait_for(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut seen = String::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            if let Ok(n) = self.0.read(&mut buf) {
                seen.push_str(&String::from_utf8_lossy(&buf[..n]));
                if seen.contains(needle) {
                    return true;
                }
            }
        }
        false
    }
}

fn pubsub_config(c: &mut redis::Connection) -> String {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("lockmod.pubsub").query(c).expect("CONFIG GET");
    v[1].clone()
}

#[test]
fn lockmod_pubsub_defaults_to_global_and_can_be_set_and_read_back() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(pubsub_config(&mut c), "global");
    ok(&mut c, &["CONFIG", "SET", "lockmod.pubsub", "sharded"]);
    assert_eq!(pubsub_config(&mut c), "sharded");
    assert!(call(&mut c, &["CONFIG", "SET", "lockmod.pubsub", "loud"]).is_err());
    assert_eq!(pubsub_config(&mut c), "sharded", "a bad value changes nothing");
    ok(&mut c, &["CONFIG", "SET", "lockmod.pubsub", "global"]);
    assert_eq!(pubsub_config(&mut c), "global");
}

#[test]
fn lockmod_pubsub_can_be_given_at_load_time() {
    let s = Server::start_with(true, &["--lockmod.pubsub", "sharded"]);
    assert_eq!(pubsub_config(&mut s.conn()), "sharded");
}

#[test]
fn a_sharded_unlock_message_reaches_ssubscribe_on_the_primary_and_a_replica_but_not_subscribe() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "lockmod.pubsub", "sharded"]);
    let r = s.replica();
    let channel = "redisson_lock__channel:{l}";
    let mut on_primary = ShardSubscriber::start(&s, channel);
    let mut on_replica = ShardSubscriber::start(&r, channel);
    let global = s.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000"]);
    assert_eq!(int(&ok(&mut c, &["LOCK.UNLOCK", "l", "o1", "30000"])), 1);
    assert!(on_primary.wait_for("smessage", Duration::from_secs(2)), "primary subscriber");
    assert!(on_replica.wait_for("smessage", Duration::from_secs(2)), "replica subscriber");
    std::thread::sleep(Duration::from_millis(100));
    assert!(global.take().is_empty(), "no global PUBLISH in sharded mode");
    assert_eq!(keys(&mut c), Vec::<String>::new());
}

#[test]
fn in_global_mode_an_unlock_message_is_a_plain_publish() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000"]);
    ok(&mut c, &["LOCK.FORCEUNLOCK", "l"]);
    assert_eq!(sub.take_n(1, Duration::from_secs(2)), msgs(&[("redisson_lock__channel:{l}", "0")]));
}
