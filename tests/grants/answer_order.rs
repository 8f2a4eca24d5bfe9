//! How parked clients are answered on each server release (docs/design.md, "A grant and its
//! reply"): Redis 7.0 from its before-sleep event, Redis 7.2 and Valkey 7.2 through a handle
//! of the module's own (`lockmod.handover`), later releases at once. On 7.2 an answer left in
//! Redis' list while `CLIENT UNBLOCK ... TIMEOUT` or the BLOCK time running out reached its
//! client tripped the server's own assertion: `SET s 0`, a parked `SEMAPHORE.ACQUIRE s 1 BLOCK
//! 0`, then `MULTI`, `SEMAPHORE.RELEASE s 1`, `CLIENT UNBLOCK <w> TIMEOUT`, `EXEC` killed Redis
//! 7.2.4. `tests/grants/grant_race.rs` and `tests/grants/grant_storm.rs` run every such race; this
//! file checks which path the server takes and the one race, on any release. `make test` also runs
//! these suites with `LOCKMOD_TEST_ANSWER_ORDER=handover` on Valkey (CI has no 7.2), and `make
//! test-compat REDIS_72=...` on a real 7.2.

use crate::common;

use common::answers::{Answer, Pinged};
use common::parked::wait_blocked;
use common::server_version::{self, parse, Release};
use common::*;

fn info_text(c: &mut redis::Connection, field: &str) -> String {
    let info: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO");
    let line = info.lines().find_map(|l| l.strip_prefix(&format!("lockmod_{field}:")));
    line.unwrap_or_else(|| panic!("no lockmod_{field} in {info}")).trim().to_string()
}

/// `calls` of `cmdstat_lockmod.handover` (0 when the command never ran or does not exist).
fn handover_calls(c: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(c).expect("INFO");
    let line = info.lines().find_map(|l| l.strip_prefix("cmdstat_lockmod.handover:calls="));
    line.and_then(|l| l.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[test]
fn server_versions_parse_from_the_servers_own_lines() {
    let r = parse("Redis server v=7.2.4 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1").expect("redis");
    assert_eq!(r, Release { valkey: false, major: 7, minor: 2, patch: 4 });
    assert_eq!(r.number(), 0x07_02_04);
    let v = parse("Valkey server v=9.1.2 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=1").expect("valkey");
    assert_eq!(v, Release { valkey: true, major: 9, minor: 1, patch: 2 });
    assert_eq!(parse("no version here"), None);
    assert_eq!(server_version::integer_message("1e+14"), "100000000000000");
    assert_eq!(server_version::integer_message("1.5e+9"), "1500000000");
    assert_eq!(server_version::integer_message("0"), "0");
    assert_eq!(server_version::integer_message("redisson"), "redisson");
}

#[test]
fn info_names_the_way_this_release_answers_parked_clients() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(info_text(&mut c, "answer_order"), server_version::answer_order(), "{:?}", server_version::release());
}

/// `lockmod.handover` exists only where the module answers through it, and is nobody's but
/// the module's: a client calling it, alone or in a transaction, gets an error and blocks
/// nothing; a user without `@admin` may not call it at all.
#[test]
fn lockmod_handover_is_the_modules_own() {
    let s = Server::start();
    let mut c = s.conn();
    let e = call(&mut c, &["LOCKMOD.HANDOVER"]).expect_err("not for clients");
    if server_version::answer_order() != "handover" {
        assert!(e.starts_with("ERR unknown command"), "{e}");
        return;
    }
    assert_eq!(e, "ERR lockmod.handover is the module's own, not for clients");
    let mut p = redis::pipe();
    p.atomic().cmd("LOCKMOD.HANDOVER").cmd("PING");
    let r: Result<Value, _> = p.query(&mut c);
    assert!(format!("{r:?}").contains("the module's own"), "{r:?}");
    assert_eq!(call(&mut c, &["PING"]), Ok(Value::SimpleString("PONG".into())));
    common::acl::user(&mut c, "app", &["~*", "&*", "+@all", "-@admin"]);
    let mut app = common::acl::conn_as(&s, "app");
    let e = call(&mut app, &["LOCKMOD.HANDOVER"]).expect_err("refused");
    assert!(e.starts_with("NOPERM"), "{e}");
    assert_eq!(parked::blocked_clients(&mut c), 0);
}

/// The race that killed Redis 7.2.4: the waiter is told it got the permit and holds it, every
/// acquire gets exactly one reply, and the server lives on. Where the module answers through
/// its handle, it did.
#[test]
fn a_timeout_unblocking_a_granted_waiter_in_the_grants_transaction_keeps_the_server_up() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "s", "0"]);
    for round in 1..=3 {
        let calls = handover_calls(&mut c);
        let mut w = Pinged::connect(&s);
        w.send(&["SEMAPHORE.ACQUIRE", "s", "1", "BLOCK", "0"]);
        wait_blocked(&mut c, 1);
        let mut p = redis::pipe();
        p.atomic().cmd("SEMAPHORE.RELEASE").arg("s").arg(1).cmd("CLIENT").arg("UNBLOCK").arg(w.id).arg("TIMEOUT");
        let r: Value = p.query(&mut c).expect("the transaction");
        assert_eq!(r, Value::Array(vec![Value::Int(1), Value::Int(1)]), "round {round}");
        assert_eq!(w.answer(), Answer::Reply(Value::Int(1)), "round {round}: told granted");
        assert_eq!(ok(&mut c, &["SEMAPHORE.AVAILABLE", "s"]), Value::Int(0), "round {round}: it holds the permit");
        assert_eq!(call(&mut c, &["PING"]), Ok(Value::SimpleString("PONG".into())));
        let used = handover_calls(&mut c) - calls;
        match server_version::answer_order() {
            "handover" => assert!(used >= 1, "round {round}: lockmod.handover ran {used} times"),
            _ => assert_eq!(used, 0, "round {round}"),
        }
        ok(&mut w.conn, &["SEMAPHORE.RELEASE", "s", "1"]);
        ok(&mut c, &["SEMAPHORE.ACQUIRE", "s", "1"]);
    }
}
