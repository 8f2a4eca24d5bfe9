//! PSEMAPHORE.* against a real redis-server (issue 26): the counter and the lease zset
//! `{p}:timeout` (permit id bytes -> absolute expiry on the server's clock), messages, bad
//! input, ACL, a replica and `DEBUG RELOAD`, the reclaim timer, `SYNC.INFO`.

use crate::common;

use common::acl::{conn_as, denied, snapshot, user};
use common::diff::now_ms;
use common::*;

const CH: &str = "redisson_sc:{p}";
const Z: &str = "{p}:timeout";

fn get(c: &mut redis::Connection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query(c).expect("GET")
}

fn leases(c: &mut redis::Connection) -> Vec<(Vec<u8>, f64)> {
    redis::cmd("ZRANGE").arg(Z).arg(0).arg(-1).arg("WITHSCORES").query(c).expect("ZRANGE")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `PSEMAPHORE.ACQUIRE p n lease` that must grant: the ids.
fn acquire(c: &mut redis::Connection, n: &str, lease: &str) -> Vec<String> {
    redis::cmd("PSEMAPHORE.ACQUIRE").arg("p").arg(n).arg(lease).query(c).expect("granted")
}

#[test]
fn acquire_leases_random_ids_at_an_absolute_server_time() {
    let s = Server::start();
    let mut c = s.conn();
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "3"]), Value::Int(1));
    let since = now_ms();
    let ids = acquire(&mut c, "2", "60000");
    assert_eq!(ids.len(), 2);
    assert!(ids.iter().all(|id| id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())), "{ids:?}");
    assert_ne!(ids[0], ids[1]);
    assert_eq!(get(&mut c, "p").as_deref(), Some("1"));
    let z = leases(&mut c);
    let mut stored: Vec<String> = z.iter().map(|(m, _)| hex(m)).collect();
    stored.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(stored, want, "Z holds the raw 16 bytes");
    for (_, at) in &z {
        assert_near(*at as i64 - since, 60_000, 1_000);
    }
    assert_eq!(ok(&mut c, &["PSEMAPHORE.ACQUIRE", "p", "2", "60000"]), Value::Nil);
    assert_eq!(ok(&mut c, &["PSEMAPHORE.ACQUIRED", "p"]), Value::Int(2));
    assert_eq!(ok(&mut c, &["PSEMAPHORE.AVAILABLE", "p"]), Value::Int(1));
    let none = acquire(&mut c, "1", "0");
    assert_eq!(leases(&mut c).last().map(|(_, t)| *t as i64), Some(922_337_203_685_477), "no lease: {none:?}");
    assert_eq!(sub.take(), msgs(&[(CH, "3")]));
}

#[test]
fn release_returns_a_held_permit_and_publishes_the_count() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "3"]);
    let ids = acquire(&mut c, "3", "60000");
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["PSEMAPHORE.RELEASE", "p", &ids[0]]), Value::Int(1));
    assert_eq!(ok(&mut c, &["PSEMAPHORE.RELEASE", "p", &ids[0]]), Value::Int(0), "released already");
    assert_eq!(ok(&mut c, &["PSEMAPHORE.RELEASE", "p", &ids[1].to_uppercase(), &ids[2]]), Value::Int(2));
    assert_eq!(get(&mut c, "p").as_deref(), Some("3"));
    assert!(leases(&mut c).is_empty());
    assert_eq!(keys(&mut c), ["p"]);
    assert_eq!(sub.take(), msgs(&[(CH, "1"), (CH, "2")]));
}

#[test]
fn updatelease_and_setpermits_write_absolute_times_and_totals() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.SETPERMITS", "p", "4"]);
    let ids = acquire(&mut c, "1", "1000");
    let since = now_ms();
    assert_eq!(ok(&mut c, &["PSEMAPHORE.UPDATELEASE", "p", &ids[0], "90000"]), Value::Int(1));
    assert_near(leases(&mut c)[0].1 as i64 - since, 90_000, 1_000);
    assert_eq!(ok(&mut c, &["PSEMAPHORE.UPDATELEASE", "p", &"ab".repeat(16), "90000"]), Value::Int(0));
    let sub = s.subscriber();
    assert_eq!(ok(&mut c, &["PSEMAPHORE.SETPERMITS", "p", "10"]), Value::Okay);
    assert_eq!(get(&mut c, "p").as_deref(), Some("9"), "9 available + 1 held");
    assert_eq!(sub.take(), msgs(&[(CH, "10")]));
}

#[test]
fn an_expired_permit_comes_back_at_its_deadline_with_nobody_calling() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "1"]);
    acquire(&mut c, "1", "200");
    let sub = s.subscriber();
    // The only message a reclaim sends, whenever it runs: nothing is called meanwhile.
    assert_eq!(sub.take_n(1, std::time::Duration::from_secs(10)), msgs(&[(CH, "1")]));
    assert_eq!(get(&mut c, "p").as_deref(), Some("1"));
    assert!(leases(&mut c).is_empty());
    let info: String = redis::cmd("INFO").arg("lockmod").query(&mut c).expect("INFO");
    assert!(info.contains("lockmod_permits_reclaimed:1"), "{info}");
}

#[test]
fn bad_input_gets_an_error_and_writes_nothing() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "2"]);
    acquire(&mut c, "1", "60000");
    ok(&mut c, &["SET", "text", "x"]);
    ok(&mut c, &["SET", "{w}:timeout", "x"]);
    ok(&mut c, &["SET", "w", "1"]);
    let before = snapshot(&mut c);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    #[rustfmt::skip]
    let cases: &[(&[&str], &str)] = &[
        (&["PSEMAPHORE.ACQUIRE", "p", "1", "-5"], "ERR lease must be a positive integer"),
        (&["PSEMAPHORE.ACQUIRE", "p", "-1", "100"], "ERR permits must be a non-negative integer"),
        (&["PSEMAPHORE.ACQUIRE", "p", "65537", "100"], "ERR value is not an integer or out of range"),
        (&["PSEMAPHORE.ACQUIRE", "p", "1", "9223372036854775807"], "ERR invalid expire time in 'psemaphore.acquire' command"),
        (&["PSEMAPHORE.ACQUIRE", "p", "1", "100", "BLOCK"], "ERR syntax error"),
        (&["PSEMAPHORE.RELEASE", "p", "xyz"], "ERR permit id must be an even number of hex digits"),
        (&["PSEMAPHORE.RELEASE", "p", "abc"], "ERR permit id must be an even number of hex digits"),
        (&["PSEMAPHORE.UPDATELEASE", "p", "ab", "-1"], "ERR lease must be a positive integer"),
        (&["PSEMAPHORE.SETPERMITS", "p", "-1"], "ERR permits must be a non-negative integer"),
        (&["PSEMAPHORE.ACQUIRE", "text", "1", "100"], "ERR value is not an integer or out of range"),
        (&["PSEMAPHORE.ACQUIRE", "w", "1", "100"], wrongtype),
        (&["PSEMAPHORE.AVAILABLE", "w"], wrongtype),
        (&["PSEMAPHORE.RELEASE", "w", "ab"], wrongtype),
        (&["PSEMAPHORE.ACQUIRE", "p", "1"], "ERR wrong number of arguments for 'psemaphore.acquire' command"),
    ];
    for (args, want) in cases {
        assert_eq!(call(&mut c, args), Err(want.to_string()), "{args:?}");
    }
    assert_eq!(snapshot(&mut c), before);
}

#[test]
fn a_user_denied_the_lease_zset_gets_noperm_and_nothing_is_written() {
    let s = Server::start();
    let mut admin = s.conn();
    ok(&mut admin, &["PSEMAPHORE.TRYSETPERMITS", "p", "2"]);
    let id = acquire(&mut admin, "1", "60000").remove(0);
    user(&mut admin, "app", &["~p", "&*", "+@all"]);
    let mut c = conn_as(&s, "app");
    let no = "NOPERM No permissions to access the '{p}:timeout' key";
    denied(&mut admin, &mut c, &["PSEMAPHORE.ACQUIRE", "p", "1", "1000"], no);
    denied(&mut admin, &mut c, &["PSEMAPHORE.RELEASE", "p", &id], no);
    denied(&mut admin, &mut c, &["PSEMAPHORE.UPDATELEASE", "p", &id, "1000"], no);
    denied(&mut admin, &mut c, &["PSEMAPHORE.AVAILABLE", "p"], no);
    denied(&mut admin, &mut c, &["SYNC.INFO", "p"], no);
    user(&mut admin, "mute", &["~*", "&other", "+@all"]);
    let mut m = conn_as(&s, "mute");
    denied(
        &mut admin,
        &mut m,
        &["PSEMAPHORE.RELEASE", "p", &id],
        "NOPERM No permissions to access the 'redisson_sc:{p}' channel",
    );
}

/// The permits available, the leases, and both keys' absolute expiry.
type State = (Option<String>, Vec<(Vec<u8>, f64)>, i64, i64);

/// The state a replica and a reload must reproduce.
fn state(c: &mut redis::Connection) -> State {
    (get(c, "p"), leases(c), pexpiretime(c, "p"), pexpiretime(c, Z))
}

#[test]
fn a_replica_and_a_reload_have_the_same_permits_and_leases() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "5"]);
    ok(&mut c, &["PEXPIRE", "p", "600000"]);
    let ids = acquire(&mut c, "3", "300000");
    acquire(&mut c, "1", "0");
    ok(&mut c, &["PSEMAPHORE.RELEASE", "p", &ids[0]]);
    ok(&mut c, &["PSEMAPHORE.UPDATELEASE", "p", &ids[1], "400000"]);
    wait_replica(&mut c);
    let want = state(&mut c);
    assert_eq!(want.1.len(), 3);
    assert!(want.3 > 0, "Z took the semaphore's TTL");
    assert_eq!(state(&mut replica.conn()), want);
    ok(&mut c, &["DEBUG", "RELOAD"]);
    assert_eq!(state(&mut c), want);
}

fn field(v: &Value, name: &str) -> Value {
    let Value::Array(items) = v else { panic!("not an array: {v:?}") };
    let at = items.iter().position(|x| *x == Value::BulkString(name.as_bytes().to_vec())).expect(name);
    items[at + 1].clone()
}

#[test]
fn sync_info_shows_the_held_permits_bounded_by_count() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["PSEMAPHORE.TRYSETPERMITS", "p", "5"]);
    acquire(&mut c, "4", "60000");
    let info = ok(&mut c, &["SYNC.INFO", "p", "COUNT", "2"]);
    assert_eq!(field(&info, "kind"), Value::BulkString(b"psemaphore".to_vec()));
    assert_eq!(field(&info, "value"), Value::Int(1));
    assert_eq!(field(&info, "permits_held_total"), Value::Int(4));
    let Value::Array(held) = field(&info, "permits_held") else { panic!("array") };
    assert_eq!(held.len(), 2);
    assert_near(int(&field(&info, "next_expiry_in_ms")), 60_000, 1_000);
    assert_eq!(field(&info, "parked_total"), Value::Int(0));
    assert_eq!(call(&mut c, &["SYNC.INFO", "p", "COUNT", "0"]), Err("ERR COUNT must be a positive integer".into()));
}
