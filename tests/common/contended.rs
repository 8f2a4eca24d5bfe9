//! Reading `LOCK.CONTENDED` and the wait-time histograms of `INFO lockmod` (issue 37).

use std::collections::BTreeMap;

use super::{ok, Value};

pub fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

/// The (field, value) pairs of a map reply, whether a RESP3 map or a RESP2 flat array.
pub fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Value::Array(a) => a.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect(),
        other => panic!("expected a map, got {other:?}"),
    }
}

pub fn get(v: &Value, name: &str) -> Value {
    pairs(v).into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no field {name} in {v:?}")).1
}

pub fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => panic!("expected an array, got {other:?}"),
    }
}

/// One name of a `LOCK.CONTENDED` reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Contended {
    pub name: String,
    pub db: i64,
    pub kind: String,
    pub waiters: i64,
    pub oldest_wait_ms: i64,
    pub holders_total: i64,
    /// (owner, kind for a read-write lock's hold, count).
    pub holders: Vec<(String, Option<String>, i64)>,
    pub held_ms: Option<i64>,
    pub pttl: i64,
}

fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

pub fn parse(v: &Value) -> Vec<Contended> {
    list(v)
        .iter()
        .map(|e| {
            let fields: Vec<String> = pairs(e).into_iter().map(|(k, _)| k).collect();
            assert_eq!(
                fields,
                ["name", "db", "kind", "waiters", "oldest_wait_ms", "holders_total", "holders", "held_ms", "pttl"]
            );
            let holders = list(&get(e, "holders"))
                .iter()
                .map(|h| {
                    let kind = pairs(h).iter().find(|(k, _)| k == "kind").map(|(_, v)| text(v));
                    (text(&get(h, "owner")), kind, int_of(&get(h, "count")))
                })
                .collect();
            let held_ms = match get(e, "held_ms") {
                Value::Nil => None,
                v => Some(int_of(&v)),
            };
            Contended {
                name: text(&get(e, "name")),
                db: int_of(&get(e, "db")),
                kind: text(&get(e, "kind")),
                waiters: int_of(&get(e, "waiters")),
                oldest_wait_ms: int_of(&get(e, "oldest_wait_ms")),
                holders_total: int_of(&get(e, "holders_total")),
                holders,
                held_ms,
                pttl: int_of(&get(e, "pttl")),
            }
        })
        .collect()
}

/// `LOCK.CONTENDED args...`, parsed.
pub fn contended(c: &mut redis::Connection, args: &[&str]) -> Vec<Contended> {
    let mut cmd = vec!["LOCK.CONTENDED"];
    cmd.extend(args);
    parse(&ok(c, &cmd))
}

/// The names of a `LOCK.CONTENDED` reply, in order.
pub fn names(list: &[Contended]) -> Vec<String> {
    list.iter().map(|c| c.name.clone()).collect()
}

/// `INFO lockmod`'s wait-time histogram of `request`: each entry (`le_0.001`, ..., `count`,
/// `sum_ms`, `gave_up`) with its value.
pub fn waits(c: &mut redis::Connection, request: &str) -> BTreeMap<String, i64> {
    let info: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix(&format!("lockmod_waits_{request}:")))
        .unwrap_or_else(|| panic!("no lockmod_waits_{request} in {info}"));
    line.trim()
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').expect("entry=value");
            (k.to_string(), v.parse().expect("an integer"))
        })
        .collect()
}
