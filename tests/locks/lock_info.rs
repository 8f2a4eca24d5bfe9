//! `LOCK.INFO`: every kind and state, under RESP2 (flat array) and RESP3 (map).

use crate::common;

use std::thread;

use common::*;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

/// The (field, value) pairs of a map reply, whether RESP3 map or RESP2 flat array.
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Map(m) => m.iter().map(|(k, v)| (text(k), v.clone())).collect(),
        Value::Array(a) => a.chunks(2).map(|p| (text(&p[0]), p[1].clone())).collect(),
        other => panic!("expected a map, got {other:?}"),
    }
}

fn get(v: &Value, name: &str) -> Value {
    pairs(v).into_iter().find(|(k, _)| k == name).unwrap_or_else(|| panic!("no field {name} in {v:?}")).1
}

fn list(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.clone(),
        other => panic!("expected an array, got {other:?}"),
    }
}

fn info(c: &mut redis::Connection, key: &str) -> Value {
    ok(c, &["LOCK.INFO", key])
}

#[test]
fn a_free_lock_is_of_kind_none_with_nothing_held_under_resp2_and_resp3() {
    let s = Server::start();
    for mut c in [s.conn(), s.conn3()] {
        let r = info(&mut c, "free");
        let fields: Vec<String> = pairs(&r).into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            fields,
            [
                "kind",
                "mode",
                "pttl",
                "holders_total",
                "holders",
                "queue_total",
                "queue",
                "parked_total",
                "parked",
                "token"
            ]
        );
        assert_eq!(text(&get(&r, "kind")), "none");
        assert_eq!(get(&r, "mode"), Value::Nil);
        assert_eq!(int(&get(&r, "pttl")), -2);
        assert!(list(&get(&r, "holders")).is_empty());
        assert_eq!(get(&r, "token"), Value::Nil);
    }
    let mut c3 = s.conn3();
    assert!(matches!(info(&mut c3, "free"), Value::Map(_)), "RESP3 replies a map");
    assert_eq!(keys(&mut s.conn()), Vec::<String>::new(), "LOCK.INFO writes nothing");
}

#[test]
fn a_held_and_reentered_lock_shows_its_owner_count_pttl_and_token() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000", "TOKEN"]);
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000", "TOKEN"]);
    for mut c in [s.conn(), s.conn3()] {
        let r = info(&mut c, "l");
        assert_eq!(text(&get(&r, "kind")), "reentrant");
        assert_near(int(&get(&r, "pttl")), 30000, 500);
        let holders = list(&get(&r, "holders"));
        assert_eq!(holders.len(), 1);
        assert_eq!(text(&get(&holders[0], "owner")), "o1");
        assert_eq!(int(&get(&holders[0], "count")), 2);
        assert_eq!(int(&get(&r, "token")), 2);
    }
    assert_eq!(hgetall(&mut c, "l"), map(&[("o1", "2")]), "the lock is unchanged");
}

#[test]
fn clients_parked_with_block_are_listed_with_their_request_and_time_waited() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000"]);
    let mut w = s.conn();
    let id = int(&ok(&mut w, &["CLIENT", "ID"]));
    let sent = std::time::Instant::now();
    let t = thread::spawn(move || ok(&mut w, &["LOCK.ACQUIRE", "l", "o2", "30000", "BLOCK", "5000"]));
    common::parked::wait_blocked(&mut c, 1);
    thread::sleep(std::time::Duration::from_millis(100));
    let r = info(&mut c, "l");
    let asked = sent.elapsed().as_millis() as i64;
    let parked = list(&get(&r, "parked"));
    assert_eq!(parked.len(), 1);
    assert_eq!(int(&get(&parked[0], "client")), id);
    assert_eq!(text(&get(&parked[0], "request")), "lock");
    assert_eq!(text(&get(&parked[0], "owner")), "o2");
    // Seen parked, then left 100 ms: it has waited at least that, and at most since it was sent
    // (a ms of rounding each way).
    let waited = int(&get(&parked[0], "waited_ms"));
    assert!((99..=asked + 1).contains(&waited), "waited {waited} ms, {asked} ms since it was sent");
    ok(&mut c, &["LOCK.UNLOCK", "l", "o1", "30000"]);
    assert_eq!(t.join().expect("thread"), Value::Nil);
    let r = info(&mut c, "l");
    assert!(list(&get(&r, "parked")).is_empty(), "the granted client left the list");
    assert_eq!(text(&get(&list(&get(&r, "holders"))[0], "owner")), "o2");
}

#[test]
fn a_read_shared_lock_lists_every_reader_with_each_read_holds_remaining_time() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r1", "30000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r1", "10000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "r2", "20000"]);
    for mut c in [s.conn(), s.conn3()] {
        let r = info(&mut c, "rw");
        assert_eq!(text(&get(&r, "kind")), "read-write");
        assert_eq!(text(&get(&r, "mode")), "read");
        let holders = list(&get(&r, "holders"));
        let r1 = holders.iter().find(|h| text(&get(h, "owner")) == "r1").expect("r1");
        assert_eq!(text(&get(r1, "kind")), "read");
        assert_eq!(int(&get(r1, "count")), 2);
        let ttls: Vec<i64> = list(&get(r1, "read_holds_pttl")).iter().map(int).collect();
        assert_near(ttls[0], 30000, 500);
        assert_near(ttls[1], 10000, 500);
        assert!(holders.iter().any(|h| text(&get(h, "owner")) == "r2"));
    }
}

#[test]
fn a_write_lock_with_read_holds_shows_the_writer_and_its_read_holds() {
    let s = Server::start();
    let mut c = s.conn();
    // Redisson's layout, written directly: the writer also holds one read hold.
    ok(&mut c, &["HSET", "rw", "mode", "write", "w1:write", "1", "w1", "1"]);
    ok(&mut c, &["PEXPIRE", "rw", "30000"]);
    ok(&mut c, &["SET", "{rw}:w1:rwlock_timeout:1", "1", "PX", "20000"]);
    let r = info(&mut c, "rw");
    assert_eq!(text(&get(&r, "mode")), "write");
    let holders = list(&get(&r, "holders"));
    let writer = holders.iter().find(|h| text(&get(h, "kind")) == "write").expect("writer");
    assert_eq!(text(&get(writer, "owner")), "w1");
    assert_eq!(int(&get(writer, "count")), 1);
    let reader = holders.iter().find(|h| text(&get(h, "kind")) == "read").expect("reader");
    assert_near(int(&list(&get(reader, "read_holds_pttl"))[0]), 20000, 500);
}

#[test]
fn a_fair_lock_shows_its_queue_in_order_with_deadlines_relative_to_now() {
    let s = Server::start();
    let mut c = s.conn();
    let now = common::diff::now_ms();
    ok(&mut c, &["HSET", "f", "o1", "1"]);
    ok(&mut c, &["PEXPIRE", "f", "30000"]);
    ok(&mut c, &["RPUSH", "redisson_lock_queue:{f}", "w1", "w2"]);
    let (d1, d2) = ((now + 35000).to_string(), (now + 40000).to_string());
    ok(&mut c, &["ZADD", "redisson_lock_timeout:{f}", &d1, "w1", &d2, "w2"]);
    for mut c in [s.conn(), s.conn3()] {
        let r = info(&mut c, "f");
        assert_eq!(text(&get(&r, "kind")), "fair");
        assert_eq!(text(&get(&list(&get(&r, "holders"))[0], "owner")), "o1");
        let q = list(&get(&r, "queue"));
        assert_eq!(q.iter().map(|w| text(&get(w, "owner"))).collect::<Vec<_>>(), ["w1", "w2"]);
        assert_near(int(&get(&q[0], "deadline_in_ms")), 35000, 500);
        assert_near(int(&get(&q[1], "deadline_in_ms")), 40000, 500);
    }
    ok(&mut c, &["DEL", "f"]);
    let r = info(&mut c, "f");
    assert_eq!(text(&get(&r, "kind")), "fair", "free with waiters is still a fair lock");
}

#[test]
fn lock_info_runs_on_a_replica_and_rejects_wrong_arity_and_wrong_type() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "l", "o1", "30000"]);
    let r = s.replica();
    wait_replica(&mut c);
    let mut rc = r.conn();
    assert_eq!(text(&get(&info(&mut rc, "l"), "kind")), "reentrant");
    assert!(call(&mut c, &["LOCK.INFO"]).unwrap_err().starts_with("ERR wrong number of arguments"));
    ok(&mut c, &["SET", "s", "x"]);
    assert!(call(&mut c, &["LOCK.INFO", "s"]).unwrap_err().starts_with("WRONGTYPE"));
}

/// The fair lock through its own commands: a holder, a Redisson-style waiter and a client
/// parked with BLOCK, which shows both in the queue and among the parked clients.
#[test]
fn a_fair_lock_with_a_parked_waiter_shows_it_queued_and_parked() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "o1", "30000", "5000"]);
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "polling", "30000", "5000"]);
    let mut w = s.conn();
    let t = thread::spawn(move || ok(&mut w, &["FAIRLOCK.ACQUIRE", "f", "parked", "30000", "5000", "BLOCK", "5000"]));
    common::parked::wait_blocked(&mut c, 1);
    let r = info(&mut c, "f");
    assert_eq!(text(&get(&r, "kind")), "fair");
    let q = list(&get(&r, "queue"));
    assert_eq!(q.iter().map(|w| text(&get(w, "owner"))).collect::<Vec<_>>(), ["polling", "parked"]);
    let parked = list(&get(&r, "parked"));
    assert_eq!(parked.len(), 1);
    assert_eq!(text(&get(&parked[0], "request")), "fair");
    assert_eq!(text(&get(&parked[0], "owner")), "parked");
    ok(&mut c, &["FAIRLOCK.CANCEL", "f", "polling", "5000"]);
    ok(&mut c, &["FAIRLOCK.UNLOCK", "f", "o1", "30000"]);
    assert_eq!(t.join().expect("thread"), Value::Nil);
    let r = info(&mut c, "f");
    assert_eq!(text(&get(&list(&get(&r, "holders"))[0], "owner")), "parked");
    assert!(list(&get(&r, "queue")).is_empty());
}

#[test]
fn count_cuts_every_list_and_the_totals_say_how_many_there_are() {
    let s = Server::start();
    let mut c = s.conn();
    for i in 0..5 {
        ok(&mut c, &["RWLOCK.RLOCK", "rw", &format!("r{i}"), "30000"]);
    }
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "holder", "30000", "60000"]);
    for i in 0..5 {
        ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", &format!("w{i}"), "30000", "60000"]);
    }
    let r = ok(&mut c, &["LOCK.INFO", "rw", "COUNT", "2"]);
    assert_eq!(int(&get(&r, "holders_total")), 5);
    assert_eq!(list(&get(&r, "holders")).len(), 2);
    let r = ok(&mut c, &["LOCK.INFO", "f", "count", "3"]);
    assert_eq!(int(&get(&r, "queue_total")), 5);
    let queue: Vec<String> = list(&get(&r, "queue")).iter().map(|w| text(&get(w, "owner"))).collect();
    assert_eq!(queue, ["w0", "w1", "w2"], "the head of the queue, in order");
    let r = ok(&mut c, &["LOCK.INFO", "f"]);
    assert_eq!(list(&get(&r, "queue")).len(), 5, "the default shows up to 100");
}

#[test]
fn a_bad_count_is_an_error() {
    let s = Server::start();
    let mut c = s.conn();
    for (args, want) in [
        (&["LOCK.INFO", "l", "COUNT", "0"][..], "ERR COUNT must be a positive integer"),
        (&["LOCK.INFO", "l", "COUNT", "-1"][..], "ERR COUNT must be a positive integer"),
        (&["LOCK.INFO", "l", "COUNT", "x"][..], "ERR value is not an integer or out of range"),
        (&["LOCK.INFO", "l", "COUNT"][..], "ERR syntax error"),
        (&["LOCK.INFO", "l", "LIMIT", "3"][..], "ERR syntax error"),
    ] {
        assert_eq!(call(&mut c, args).expect_err("an error"), want, "{args:?}");
    }
    let err = call(&mut c, &["LOCK.INFO", "l", "COUNT", "1", "x"]).expect_err("an error");
    assert!(err.starts_with("ERR wrong number of arguments"), "{err}");
}
