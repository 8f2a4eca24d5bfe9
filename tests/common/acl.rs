//! ACL users for the tests: create one, connect as one, and a snapshot of the whole keyspace
//! to prove a denied command wrote nothing.

use super::{call, ok, Server, Value};

/// `ACL SETUSER name reset on nopass <rules...>`.
pub fn user(admin: &mut redis::Connection, name: &str, rules: &[&str]) {
    let mut args = vec!["ACL", "SETUSER", name, "reset", "on", "nopass"];
    args.extend(rules);
    ok(admin, &args);
}

/// A new connection authenticated as `name` (a `nopass` user takes any password).
pub fn conn_as(s: &Server, name: &str) -> redis::Connection {
    let mut c = s.conn();
    ok(&mut c, &["AUTH", name, "any"]);
    c
}

/// Every key with its type, value and absolute expiry: equal snapshots mean nothing was
/// written (an untouched TTL keeps its `PEXPIRETIME`).
pub fn snapshot(c: &mut redis::Connection) -> Vec<(String, String, Value, i64)> {
    let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let kind: String = redis::cmd("TYPE").arg(&k).query(c).expect("TYPE");
            let value = match kind.as_str() {
                "hash" => ok(c, &["HGETALL", &k]),
                "list" => ok(c, &["LRANGE", &k, "0", "-1"]),
                "zset" => ok(c, &["ZRANGE", &k, "0", "-1", "WITHSCORES"]),
                _ => ok(c, &["GET", &k]),
            };
            let at: i64 = redis::cmd("PEXPIRETIME").arg(&k).query(c).expect("PEXPIRETIME");
            (k, kind, value, at)
        })
        .collect()
}

/// Runs `args`, which must fail with exactly `error`, and checks it wrote nothing.
#[track_caller]
pub fn denied(admin: &mut redis::Connection, c: &mut redis::Connection, args: &[&str], error: impl AsRef<str>) {
    let before = snapshot(admin);
    assert_eq!(call(c, args), Err(error.as_ref().to_string()), "{args:?}");
    assert_eq!(snapshot(admin), before, "{args:?} changed the keyspace");
}
