//! RATELIMITER.* against a real server (issue 30): replies, Redisson's five keys (the hash,
//! the value, the grant zset's member bytes and scores), TTLs, keyspace events, bad input,
//! ACL, a replica and `DEBUG RELOAD`, `INFO lockmod` and `SYNC.INFO`. Times are given with
//! `NOW` wherever a reply depends on them, so nothing here races the clock.

use crate::common;

use common::acl::{conn_as, denied, snapshot, user};
use common::*;

const T0: i64 = 1_000_000;

fn now(t: i64) -> String {
    (T0 + t).to_string()
}

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

/// The grant zset as (member bytes, score).
fn members(c: &mut redis::Connection, key: &str) -> Vec<(Vec<u8>, i64)> {
    let v: Vec<(Vec<u8>, f64)> =
        redis::cmd("ZRANGE").arg(key).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE");
    v.into_iter().map(|(m, s)| (m, s as i64)).collect()
}

/// Each member as (ms after T0, permits), checking Redisson's layout: one length byte, 16
/// random bytes, the permits as 4 bytes little-endian.
fn grants(c: &mut redis::Connection, key: &str) -> Vec<(i64, u32)> {
    members(c, key)
        .into_iter()
        .map(|(m, s)| {
            assert_eq!((m.len(), m[0]), (21, 16), "struct.pack('Bc0I', 16, random, permits): {m:?}");
            (s - T0, u32::from_le_bytes([m[17], m[18], m[19], m[20]]))
        })
        .collect()
}

fn acquire(c: &mut redis::Connection, n: &str, t: i64) -> Value {
    ok(c, &["RATELIMITER.ACQUIRE", "r", n, "NOW", &now(t)])
}

fn limiter(s: &Server, rate: &str, interval: &str) -> redis::Connection {
    let mut c = s.conn();
    assert_eq!(ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", rate, interval]), Value::Int(1));
    c
}

#[test]
fn trysetrate_writes_redissons_hash_once_and_a_keepalive_is_its_ttl() {
    let s = Server::start();
    let mut c = s.conn();
    let args = ["RATELIMITER.TRYSETRATE", "r", "per_client", "10", "1000", "KEEPALIVE", "60000"];
    assert_eq!(ok(&mut c, &args), Value::Int(1));
    assert_eq!(
        hgetall(&mut c, "r"),
        map(&[("rate", "10"), ("interval", "1000"), ("type", "1"), ("keepAliveTime", "60000")])
    );
    assert_near(pttl(&mut c, "r"), 60_000, 1_000);
    assert_eq!(ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "3", "5"]), Value::Int(0));
    assert_eq!(hgetall(&mut c, "r")["rate"], "10");
    assert_eq!(ok(&mut c, &["RATELIMITER.TRYSETRATE", "o", "OVERALL", "3", "5"]), Value::Int(1));
    assert_eq!(hgetall(&mut c, "o"), map(&[("rate", "3"), ("interval", "5"), ("type", "0"), ("keepAliveTime", "0")]));
    assert_eq!(pttl(&mut c, "o"), -1);
    assert_eq!(keys(&mut c), ["o", "r"]);
}

#[test]
fn acquire_grants_in_redissons_layout_and_refuses_with_redissons_wait() {
    let s = Server::start();
    let mut c = limiter(&s, "10", "1000");
    assert_eq!(acquire(&mut c, "4", 0), Value::Nil);
    assert_eq!(acquire(&mut c, "3", 0), Value::Nil);
    assert_eq!(acquire(&mut c, "3", 10), Value::Nil);
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("0"));
    // Each grant is a member of its own, as Redisson's body makes them (a millisecond's grants
    // fold into one once there are 16 of them: tests/rate/ratelimiter_long.rs).
    let mut per_ms: Vec<(i64, u32)> = Vec::new();
    for (t, p) in grants(&mut c, "{r}:permits") {
        match per_ms.last_mut() {
            Some(last) if last.0 == t => last.1 += p,
            _ => per_ms.push((t, p)),
        }
    }
    assert_eq!(per_ms, [(0, 7), (10, 3)]);
    assert_eq!(ok(&mut c, &["ZCARD", "{r}:permits"]), Value::Int(3));
    assert_eq!(acquire(&mut c, "1", 20), Value::Int(3 + 1_000 - 20));
    assert_eq!(acquire(&mut c, "1", 999), Value::Int(4));
    // The 7 of T0 leave the window at T0 + 1,000.
    assert_eq!(acquire(&mut c, "5", 1_000), Value::Nil);
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("2"));
    assert_eq!(grants(&mut c, "{r}:permits"), [(10, 3), (1_000, 5)]);
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &now(1_010)]), Value::Int(5));
    assert_eq!(grants(&mut c, "{r}:permits"), [(1_000, 5)]);
    assert_eq!(keys(&mut c), ["r", "{r}:permits", "{r}:value"]);
}

#[test]
fn a_release_takes_permits_off_the_newest_grants_and_never_passes_the_rate() {
    let s = Server::start();
    let mut c = limiter(&s, "10", "1000");
    for (t, n) in [(0, "2"), (1, "3"), (2, "4")] {
        assert_eq!(acquire(&mut c, n, t), Value::Nil);
    }
    assert_eq!(ok(&mut c, &["RATELIMITER.RELEASE", "r", "5", "NOW", &now(3)]), Value::Int(6));
    assert_eq!(grants(&mut c, "{r}:permits"), [(0, 2), (1, 2)]);
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("6"));
    // Redisson 7329: once they expire, only what is left comes back.
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &now(5_000)]), Value::Int(10));
    assert_eq!(ok(&mut c, &["RATELIMITER.RELEASE", "r", "3", "NOW", &now(5_000)]), Value::Int(10));
    // Redisson 7342: acquire and release in turns, and the count stays at the rate.
    for i in 0..25 {
        assert_eq!(acquire(&mut c, "1", 6_000 + 100 * i), Value::Nil);
        let t = now(6_000 + 100 * i);
        assert_eq!(ok(&mut c, &["RATELIMITER.RELEASE", "r", "1", "NOW", &t]), Value::Int(10), "step {i}");
    }
    assert_eq!(members(&mut c, "{r}:permits"), vec![]);
}

#[test]
fn per_client_limiters_keep_one_state_per_client_id() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "PER_CLIENT", "2", "1000"]);
    for id in ["a", "b"] {
        assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "2", "CLIENT", id, "NOW", &now(0)]), Value::Nil);
    }
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "CLIENT", "a", "NOW", &now(1)]), Value::Int(1_002));
    assert_eq!(keys(&mut c), ["r", "{r}:permits:a", "{r}:permits:b", "{r}:value:a", "{r}:value:b"]);
    let no = "ERR a PER_CLIENT rate limiter needs CLIENT id";
    assert_eq!(call(&mut c, &["RATELIMITER.ACQUIRE", "r", "1"]), Err(no.into()));
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "CLIENT", "b", "NOW", &now(1_000)]), Value::Int(2));
    // A name with its own hash tag keeps it, as Redisson's suffix rule.
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "x{t}", "PER_CLIENT", "2", "1000"]);
    ok(&mut c, &["RATELIMITER.ACQUIRE", "x{t}", "1", "CLIENT", "id", "NOW", &now(0)]);
    assert_eq!(get(&mut c, "x{t}:value:id").as_deref(), Some("1"));
}

#[test]
fn setrate_resets_keeps_or_changes_the_type_as_redissons_set_rate_args() {
    let s = Server::start();
    let mut c = limiter(&s, "10", "1000");
    acquire(&mut c, "4", 0);
    let keep = ["RATELIMITER.SETRATE", "r", "OVERALL", "20", "1000", "KEEPSTATE", "NOW", &now(1)];
    assert_eq!(ok(&mut c, &keep), Value::Int(1));
    assert_eq!(get(&mut c, "{r}:value").as_deref(), Some("16"));
    assert_eq!(grants(&mut c, "{r}:permits"), [(0, 4)]);
    assert_eq!(ok(&mut c, &["RATELIMITER.SETRATE", "r", "OVERALL", "20", "2000", "KEEPALIVE", "5000"]), Value::Int(1));
    assert_eq!(keys(&mut c), ["r"], "no KEEPSTATE: the state is reset");
    assert_eq!(
        hgetall(&mut c, "r"),
        map(&[("rate", "20"), ("interval", "2000"), ("type", "0"), ("keepAliveTime", "5000")])
    );
    assert_near(pttl(&mut c, "r"), 5_000, 1_000);
    acquire(&mut c, "1", 0);
    ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "CLIENT", "me", "NOW", &now(0)]);
    assert_eq!(keys(&mut c), ["r", "{r}:permits", "{r}:value"], "an OVERALL limiter ignores CLIENT");
    ok(&mut c, &["SET", "{r}:value:me", "3"]);
    let per = ["RATELIMITER.SETRATE", "r", "PER_CLIENT", "5", "1000", "KEEPSTATE", "CLIENT", "me"];
    assert_eq!(ok(&mut c, &per), Value::Int(1));
    assert_eq!(keys(&mut c), ["r"], "a new type drops the overall state and the client's");
    assert_eq!(ok(&mut c, &["RATELIMITER.SETRATE", "none", "OVERALL", "5", "1000", "XX"]), Value::Int(0));
    assert_eq!(keys(&mut c), ["r"]);
}

#[test]
fn ttls_follow_the_keepalive_or_the_hash_on_every_call() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "10", "1000", "KEEPALIVE", "60000"]);
    ok(&mut c, &["PEXPIRE", "r", "10000"]);
    let since = diff::now_ms();
    acquire(&mut c, "1", 0);
    for k in ["r", "{r}:value", "{r}:permits"] {
        assert_lease(&mut c, k, 60_000, since);
    }
    let s2 = Server::start();
    let mut c = limiter(&s2, "10", "1000");
    ok(&mut c, &["PEXPIRE", "r", "30000"]);
    let at = pexpiretime(&mut c, "r");
    // AVAILABLE writes the value, and gives it the TTL an acquire gives (Redisson's leaves none).
    assert_eq!(ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &now(0)]), Value::Int(10));
    assert_eq!(pexpiretime(&mut c, "{r}:value"), at);
    acquire(&mut c, "2", 0);
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "1", "NOW", &now(0)]);
    assert_eq!((pexpiretime(&mut c, "{r}:value"), pexpiretime(&mut c, "{r}:permits")), (at, at));
}

#[test]
fn the_writes_fire_the_keyspace_events_of_redissons_commands() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    let sub = s.subscriber();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "10", "1000", "KEEPALIVE", "60000"]);
    acquire(&mut c, "3", 0);
    acquire(&mut c, "1", 2_000);
    let events: Vec<(String, String)> = sub
        .take()
        .into_iter()
        .filter_map(|(ch, ev)| ch.strip_prefix("__keyspace@0__:").map(|k| (k.to_string(), ev)))
        .collect();
    let (h, v, z) = ("r", "{r}:value", "{r}:permits");
    let want = [
        (h, "hset"),
        (h, "hset"),
        (h, "hset"),
        (h, "hset"),
        (h, "expire"),
        (v, "set"),
        (z, "zadd"),
        (v, "incrby"), // Redis fires incrby for DECRBY (and DECR)
        (h, "expire"),
        (v, "expire"),
        (z, "expire"),
        (z, "zremrangebyscore"),
        (z, "del"),
        (v, "set"),
        (z, "zadd"),
        (v, "incrby"), // Redis fires incrby for DECRBY (and DECR)
        (h, "expire"),
        (v, "expire"),
        (z, "expire"),
    ];
    assert_eq!(events, msgs(&want));
}

#[test]
fn every_derived_key_is_checked_against_the_acl_before_any_write() {
    let s = Server::start();
    let mut admin = limiter(&s, "10", "1000");
    acquire(&mut admin, "1", 0);
    user(&mut admin, "app", &["~r", "~{r}:value", "+@all"]);
    let mut c = conn_as(&s, "app");
    let no = "NOPERM No permissions to access the '{r}:permits' key";
    denied(&mut admin, &mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &now(1)], no);
    denied(&mut admin, &mut c, &["RATELIMITER.RELEASE", "r", "1"], no);
    denied(&mut admin, &mut c, &["RATELIMITER.AVAILABLE", "r"], no);
    denied(&mut admin, &mut c, &["RATELIMITER.SETRATE", "r", "OVERALL", "5", "1000"], no);
    user(&mut admin, "all", &["~r", "~{r}:*", "+@all"]);
    let mut c = conn_as(&s, "all");
    assert_eq!(ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1", "NOW", &now(1)]), Value::Nil);
    // A user who may only read the limiter: the key spec makes the server refuse the write.
    user(&mut admin, "ro", &["%R~*", "+@all"]);
    let mut r = conn_as(&s, "ro");
    denied(&mut admin, &mut r, &["RATELIMITER.ACQUIRE", "r", "1"], server_version::key_denied());
}

fn state(c: &mut redis::Connection) -> Vec<(String, String, Value, i64)> {
    snapshot(c)
}

/// The permits of the grants live at `t` (ms after T0), for a 1,000 ms window.
fn live(c: &mut redis::Connection, key: &str, t: i64) -> i64 {
    grants(c, key).into_iter().filter(|&(at, _)| at > t - 1_000).map(|(_, p)| i64::from(p)).sum()
}

#[test]
fn a_replica_and_a_reload_have_the_same_limiter_with_the_same_absolute_times() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "10", "1000", "KEEPALIVE", "600000"]);
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "p", "PER_CLIENT", "5", "1000"]);
    ok(&mut c, &["PEXPIRE", "p", "600000"]);
    for i in 0..20 {
        let _ = acquire(&mut c, "1", 60 * i);
        ok(&mut c, &["RATELIMITER.ACQUIRE", "p", "2", "CLIENT", "c", "NOW", &now(60 * i)]);
    }
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "3", "NOW", &now(1_200)]);
    ok(&mut c, &["RATELIMITER.AVAILABLE", "p", "CLIENT", "c", "NOW", &now(1_500)]);
    ok(
        &mut c,
        &["RATELIMITER.SETRATE", "r", "OVERALL", "8", "1000", "KEEPALIVE", "600000", "KEEPSTATE", "NOW", &now(1_600)],
    );
    wait_replica(&mut c);
    let want = state(&mut c);
    assert!(want.len() >= 5, "{want:?}");
    assert_eq!(state(&mut replica.conn()), want);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(state(&mut c), want);
    // The totals remembered before the reload still match the reloaded zsets: a call on them
    // answers what one on the replica (which never remembered any) answers.
    let (a, b) = (s.conn(), replica.conn());
    drop((a, b));
    let here = ok(&mut c, &["RATELIMITER.AVAILABLE", "r", "NOW", &now(1_700)]);
    assert_eq!(here, Value::Int(8 - live(&mut c, "{r}:permits", 1_700)));
}

#[test]
fn the_aof_replays_to_the_same_limiter() {
    let s = Server::start_with(true, &["--appendonly", "yes"]);
    let mut c = s.conn();
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "4", "1000", "KEEPALIVE", "600000"]);
    for i in 0..12 {
        let _ = acquire(&mut c, "1", 150 * i);
    }
    ok(&mut c, &["RATELIMITER.RELEASE", "r", "2", "NOW", &now(1_700)]);
    ok(
        &mut c,
        &["RATELIMITER.SETRATE", "r", "OVERALL", "3", "1000", "KEEPALIVE", "600000", "KEEPSTATE", "NOW", &now(1_800)],
    );
    let want = state(&mut c);
    assert!(want.len() == 3, "{want:?}");
    ok(&mut c, &["DEBUG", "LOADAOF"]);
    assert_eq!(state(&mut c), want);
}

#[test]
fn info_lockmod_counts_the_rate_limiter_and_sync_info_shows_its_state() {
    let s = Server::start();
    let mut c = limiter(&s, "3", "600000");
    // On the server's clock, which SYNC.INFO reads.
    for _ in 0..4 {
        ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "1"]);
    }
    let info: String = redis::cmd("INFO").arg("lockmod").query(&mut c).expect("INFO");
    for line in ["lockmod_ratelimiter_calls:5", "lockmod_ratelimiter_granted:3", "lockmod_ratelimiter_refused:1"] {
        assert!(info.contains(line), "{line} in {info}");
    }
    let v: Vec<Value> = redis::cmd("SYNC.INFO").arg("r").arg("COUNT").arg(2).query(&mut c).expect("SYNC.INFO");
    let fields: std::collections::BTreeMap<String, Value> = v
        .chunks(2)
        .map(|p| match &p[0] {
            Value::BulkString(k) => (String::from_utf8_lossy(k).into_owned(), p[1].clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(fields["kind"], Value::BulkString(b"ratelimiter".to_vec()));
    assert_eq!((fields["rate"].clone(), fields["interval_ms"].clone()), (Value::Int(3), Value::Int(600_000)));
    assert_eq!((fields["available"].clone(), fields["permits_in_window"].clone()), (Value::Int(0), Value::Int(3)));
    assert!(matches!(fields["grants_total"], Value::Int(1..=3)), "grants of one ms fold: {fields:?}");
    match &fields["grants"] {
        Value::Array(g) => assert!(!g.is_empty() && g.len() <= 2, "COUNT 2 bounds the list: {g:?}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(call(&mut c, &["SYNC.INFO", "r", "CLIENT"]), Err("ERR syntax error".into()));
    // A hash that is no rate limiter (a lock) is the wrong type, as before.
    ok(&mut c, &["LOCK.ACQUIRE", "lock", "o", "60000"]);
    let wrong = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(call(&mut c, &["SYNC.INFO", "lock"]), Err(wrong.into()));
}

#[test]
fn the_flags_say_what_each_command_does() {
    let s = Server::start();
    let mut c = s.conn();
    let flags = |c: &mut redis::Connection, name: &str| -> Vec<String> {
        let info: Vec<Vec<Value>> = redis::cmd("COMMAND").arg("INFO").arg(name).query(c).expect("INFO");
        match &info[0][2] {
            Value::Array(f) => f
                .iter()
                .map(|v| match v {
                    Value::SimpleString(s) => s.clone(),
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    };
    for (name, has, not) in [
        ("RATELIMITER.ACQUIRE", &["write", "denyoom", "blocking"][..], &["fast"][..]),
        ("RATELIMITER.TRYSETRATE", &["write", "denyoom", "fast"], &[]),
        ("RATELIMITER.RELEASE", &["write"], &["denyoom", "fast"]),
        ("RATELIMITER.AVAILABLE", &["write"], &["denyoom", "fast"]),
    ] {
        let f = flags(&mut c, name);
        assert!(has.iter().all(|h| f.iter().any(|x| x == h)), "{name}: {f:?}");
        assert!(not.iter().all(|n| !f.iter().any(|x| x == n)), "{name}: {f:?}");
    }
}
