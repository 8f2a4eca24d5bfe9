//! Keyspace events (issue 29): every write of the module fires the events that the command it
//! replicates as fires on a server without the module. A generic check: a story runs on the
//! module's server with `notify-keyspace-events KEA`, its replication stream is read as a
//! replica reads it (`SYNC`), those commands are replayed on a plain server, and the two event
//! streams must be equal, event for event. Before the fix, `SEMAPHORE.ACQUIRE` fired `decrby`
//! where the `DECRBY` it replicates fires `incrby` (on Redis and Valkey alike, as Redisson's Lua).
//!
//! The fair lock's documented exception (docs/design.md): it fires the Lua's `zincr` for a
//! deadline move it replicates as `ZADD`, one for a whole grant, and one `lrem` for a batch of
//! cancels it replicates as the queue's new content. Its story maps those, and only those.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::*;

/// The channel of the marker that ends a story's stream.
const MARK: &str = "lockmod-test-events-end";

/// What a replica is sent after `SYNC`: the commands, as argument lists.
struct Feed {
    inp: BufReader<TcpStream>,
}

impl Feed {
    fn attach(s: &Server) -> Feed {
        let mut out = TcpStream::connect(("127.0.0.1", s.port)).expect("connect");
        out.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        out.write_all(b"SYNC\r\n").expect("SYNC");
        let mut inp = BufReader::new(out);
        // Newlines while the RDB is made, then `$<len>` and the RDB itself (no CRLF after it).
        let mut line = String::new();
        loop {
            line.clear();
            inp.read_line(&mut line).expect("RDB header");
            if let Some(n) = line.trim_end().strip_prefix('$') {
                let mut rdb = vec![0u8; n.parse().expect("RDB length")];
                inp.read_exact(&mut rdb).expect("RDB");
                return Feed { inp };
            }
        }
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.inp.read_line(&mut line).expect("stream");
        line.trim_end().to_string()
    }

    /// The next command of the stream.
    fn next(&mut self) -> Vec<Vec<u8>> {
        let head = self.line();
        let n: usize = head.strip_prefix('*').unwrap_or_else(|| panic!("not a command: {head:?}")).parse().expect("n");
        (0..n)
            .map(|_| {
                let len: usize = self.line().strip_prefix('$').expect("bulk").parse().expect("len");
                let mut b = vec![0u8; len + 2];
                self.inp.read_exact(&mut b).expect("bulk");
                b.truncate(len);
                b
            })
            .collect()
    }

    /// Every command up to the marker `PUBLISH` (sent now through `c`), without the ones that
    /// fire no keyspace event (`MULTI`, `EXEC`, `SELECT`, `PING`, `PUBLISH`).
    fn until_marker(&mut self, c: &mut redis::Connection) -> Vec<Vec<Vec<u8>>> {
        let _: i64 = redis::cmd("PUBLISH").arg(MARK).arg("x").query(c).expect("PUBLISH");
        let mut out = Vec::new();
        loop {
            let cmd = self.next();
            let name = String::from_utf8_lossy(&cmd[0]).to_uppercase();
            if name == "PUBLISH" && cmd.get(1).map(Vec::as_slice) == Some(MARK.as_bytes()) {
                return out;
            }
            if !["MULTI", "EXEC", "SELECT", "PING", "PUBLISH", "SPUBLISH"].contains(&name.as_str()) {
                out.push(cmd);
            }
        }
    }
}

/// Keyspace events as (event, key), in order.
type Events = Vec<(String, String)>;

/// The keyspace events the subscriber got, in order.
fn key_events(sub: &Subscriber) -> Events {
    sub.take()
        .into_iter()
        .filter_map(|(ch, key)| ch.strip_prefix("__keyevent@0__:").map(|e| (e.to_string(), key)))
        .collect()
}

fn kea(c: &mut redis::Connection) {
    ok(c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
}

/// Runs `story` on a module server started with `extra`, and returns its events and the events
/// of its replicated commands replayed on a plain server.
fn both(extra: &[&str], story: impl FnOnce(&mut redis::Connection)) -> (Events, Events) {
    let m = Server::start_with(true, extra);
    let mut c = m.conn();
    kea(&mut c);
    let mut feed = Feed::attach(&m);
    let sub = m.subscriber();
    story(&mut c);
    let module_events = key_events(&sub);
    let replicated = feed.until_marker(&mut c);
    assert!(!replicated.is_empty(), "the story replicated nothing");
    let p = Server::start_plain();
    let mut pc = p.conn();
    kea(&mut pc);
    let psub = p.subscriber();
    for cmd in &replicated {
        let mut r = redis::cmd(&String::from_utf8_lossy(&cmd[0]));
        for a in &cmd[1..] {
            r.arg(a.as_slice());
        }
        let _: Value = r.query(&mut pc).unwrap_or_else(|e| panic!("replaying {cmd:?}: {e}"));
    }
    (module_events, key_events(&psub))
}

fn run(c: &mut redis::Connection, cmds: &[&[&str]]) {
    for cmd in cmds {
        call(c, cmd).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }
}

#[test]
fn the_synchronizers_fire_the_events_of_what_they_replicate() {
    let (module, plain) = both(&[], |c| {
        run(
            c,
            &[
                &["SEMAPHORE.TRYSETPERMITS", "s", "5"],
                &["SEMAPHORE.ACQUIRE", "s", "2"],
                &["SEMAPHORE.RELEASE", "s", "1"],
                &["SEMAPHORE.ADDPERMITS", "s", "3"],
                &["SEMAPHORE.DRAIN", "s"],
                &["SEMAPHORE.RELEASE", "s", "2"],
                &["SEMAPHORE.TRYSETPERMITS", "t", "1", "LEASE", "60000"],
                &["SEMAPHORE.ACQUIRE", "t", "1"],
                &["PSEMAPHORE.TRYSETPERMITS", "p", "4"],
                &["PSEMAPHORE.SETPERMITS", "p", "6"],
                &["COUNTDOWN.TRYSETCOUNT", "l", "2"],
                &["COUNTDOWN.DECR", "l"],
                &["COUNTDOWN.DECR", "l"],
                &["COUNTDOWN.TRYSETCOUNT", "m", "1"],
                &["SET", "m", "-1"],
                &["COUNTDOWN.DECR", "m"],
            ],
        );
        let ids: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(3).arg(60_000).query(c).expect("granted");
        ok(c, &["PSEMAPHORE.UPDATELEASE", "p", &ids[0], "120000"]);
        ok(c, &["PSEMAPHORE.RELEASE", "p", &ids[0]]);
        ok(c, &["PSEMAPHORE.RELEASE", "p", &ids[1], &ids[2]]);
        // A lease that ends: returned by the module's timer, outside any command.
        let short: Vec<String> = redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(2).arg(50).query(c).expect("granted");
        assert_eq!(short.len(), 2);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while redis::cmd("ZCARD").arg("{p}:timeout").query::<i64>(c).expect("ZCARD") > 0 {
            assert!(std::time::Instant::now() < deadline, "the lease never came back");
            std::thread::sleep(Duration::from_millis(10));
        }
        ok(c, &["PSEMAPHORE.AVAILABLE", "p"]);
    });
    for e in ["incrby", "set", "zadd", "zrem", "del", "expire"] {
        assert!(module.iter().any(|(ev, _)| ev == e), "no {e} event: {module:?}");
    }
    assert!(!module.iter().any(|(ev, _)| ev == "decrby"), "Redis fires no decrby: {module:?}");
    assert_eq!(module, plain);
}

#[test]
fn redissons_synchronizer_bodies_run_natively_fire_the_events_of_what_they_replicate() {
    let bodies = common::sync_pair::load();
    let body = |prefix: &str| bodies.by_prefix(prefix).text.clone();
    // tryAcquire (semaphore), tryAcquire(ids) (expirable), countDown: the decrementing bodies.
    let (sem, perm, down) = (body("c7dc9"), body("992c9"), body("38060"));
    let (module, plain) = both(&["--lockmod.redisson-scripts", "native"], |c| {
        let natively = common::redisson::field(c, "redisson_native_total");
        // As Redisson sends them: `EVALSHA` of a loaded body.
        let eval = |c: &mut redis::Connection, body: &str, keys: &[&str], argv: &[&[u8]]| {
            let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(body).query(c).expect("SCRIPT LOAD");
            let mut r = redis::cmd("EVALSHA");
            r.arg(sha).arg(keys.len());
            for k in keys {
                r.arg(*k);
            }
            for a in argv {
                r.arg(*a);
            }
            r.query::<Value>(c).expect("EVAL")
        };
        run(c, &[&["SET", "s", "5"], &["SET", "p", "5"], &["SET", "l", "2"]]);
        eval(c, &sem, &["s"], &[b"2"]);
        let now = common::diff::now_ms();
        let until = (now + 60_000).to_string();
        let (n, t) = (now.to_string(), "922337203685477");
        let args: [&[u8]; 7] =
            [b"2", until.as_bytes(), n.as_bytes(), t.as_bytes(), b"publish", b"id-0000000000001", b"id-0000000000002"];
        eval(c, &perm, &["p", "{p}:timeout", "redisson_sc:{p}"], &args);
        let latch = ["l", "redisson_countdownlatch__channel__{l}"];
        eval(c, &down, &latch, &[b"0", b"publish"]);
        eval(c, &down, &latch, &[b"0", b"publish"]);
        assert_eq!(common::redisson::field(c, "redisson_native_total"), natively + 4, "all four run natively");
    });
    assert!(module.iter().filter(|(ev, _)| ev == "incrby").count() >= 4, "{module:?}");
    assert!(!module.iter().any(|(ev, _)| ev == "decrby"), "Redis fires no decrby: {module:?}");
    assert_eq!(module, plain);
}

#[test]
fn the_locks_fire_the_events_of_what_they_replicate() {
    let (module, plain) = both(&[], |c| {
        run(
            c,
            &[
                &["LOCK.ACQUIRE", "a", "o1", "30000"],
                &["LOCK.ACQUIRE", "a", "o1", "30000", "TOKEN"],
                &["LOCK.RENEW", "a", "o1", "60000"],
                &["LOCK.UNLOCK", "a", "o1", "30000"],
                &["LOCK.UNLOCK", "a", "o1", "30000", "LATCH", "r1", "5000"],
                &["LOCK.ACQUIRE", "b", "o1", "30000"],
                &["LOCK.FORCEUNLOCK", "b"],
                &["RWLOCK.RLOCK", "r", "o1", "30000"],
                &["RWLOCK.RLOCK", "r", "o2", "30000"],
                &["RWLOCK.RENEW", "r", "o1", "60000"],
                &["RWLOCK.UNLOCK", "r", "o1", "READ", "30000"],
                &["RWLOCK.UNLOCK", "r", "o2", "READ", "30000"],
                &["RWLOCK.WLOCK", "w", "o1", "30000"],
                &["RWLOCK.WLOCK", "w", "o1", "30000", "TOKEN"],
                &["RWLOCK.RLOCK", "w", "o1", "30000"],
                &["RWLOCK.UNLOCK", "w", "o1", "WRITE", "30000"],
                &["RWLOCK.UNLOCK", "w", "o1", "WRITE", "30000"],
                &["RWLOCK.FORCEUNLOCK", "w", "READ"],
            ],
        );
    });
    for e in ["hincrby", "hset", "hdel", "expire", "del", "incrby", "set"] {
        assert!(module.iter().any(|(ev, _)| ev == e), "no {e} event: {module:?}");
    }
    assert_eq!(module, plain);
}

#[test]
fn the_fair_lock_differs_only_where_documented() {
    let (module, plain) = both(&[], |c| {
        let acquire = |o: &str| ["FAIRLOCK.ACQUIRE", "f", o, "30000", "5000"].map(str::to_string);
        for o in ["a", "b", "c", "d"] {
            let cmd = acquire(o);
            call(c, &cmd.iter().map(String::as_str).collect::<Vec<_>>()).expect("acquire");
        }
        run(
            c,
            &[
                &["FAIRLOCK.CANCEL", "f", "c", "5000"],
                &["FAIRLOCK.RENEW", "f", "a", "60000"],
                &["FAIRLOCK.UNLOCK", "f", "a", "30000"],
                &["FAIRLOCK.ACQUIRE", "f", "b", "30000", "5000"],
                &["FAIRLOCK.FORCEUNLOCK", "f"],
            ],
        );
    });
    // The documented exception: the module fires the Lua's `zincr` for a move it replicates
    // as `ZADD` (which fires `zadd` on the replica). Everything else is equal.
    let mapped: Vec<(String, String)> = module
        .iter()
        .map(|(e, k)| if e == "zincr" { ("zadd".to_string(), k.clone()) } else { (e.clone(), k.clone()) })
        .collect();
    for e in ["rpush", "lpop", "lrem", "zadd", "zrem", "hincrby", "del", "expire"] {
        assert!(mapped.iter().any(|(ev, _)| ev == e), "no {e} event: {module:?}");
    }
    assert_eq!(mapped, plain);
}
