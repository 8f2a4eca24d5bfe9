//! `lockmod.redisson-scripts` around the scripts themselves: switched at run time, inside
//! MULTI/EXEC, by `EVAL`, on a replica, under `maxmemory`, in a cluster node, with ACL users,
//! with keys the module would not derive, and the `INFO lockmod` counters. Each case is
//! compared with what a plain server (Lua) answers.

use crate::common;

use common::redisson::{calls, field, info, Raw, RawConn, Scripts};
use common::*;

const OWNER: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:1";
const ACQUIRE: &str = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
const UNLOCK: &str = "6866459238a13a701d42f4971f12d9f3a50e2442";

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn native() -> Server {
    Server::start_with(true, &["--lockmod.redisson-scripts", "native"])
}

fn load(s: &Server, scripts: &Scripts) {
    let mut c = s.conn();
    for b in &scripts.bodies {
        let _: String = redis::cmd("SCRIPT").arg("LOAD").arg(&b.text).query(&mut c).expect("SCRIPT LOAD");
    }
}

fn acquire(name: &str, owner: &str) -> Vec<String> {
    ["EVALSHA", ACQUIRE, "1", name, "30000", owner].iter().map(|s| s.to_string()).collect()
}

fn unlock(name: &str, owner: &str, request: &str) -> Vec<String> {
    let chan = common::names::lock_channel(name);
    let latch = common::names::latch(name, request);
    ["EVALSHA", UNLOCK, "3", name, &chan, &latch, "0", "30000", owner, "PUBLISH", "5000"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// Runs `args` on both and asserts the replies are the same bytes.
fn same(lua: &mut RawConn, nat: &mut RawConn, args: &[String]) -> Raw {
    let (l, n) = (lua.call(args), nat.call(args));
    assert_eq!(l, n, "{args:?}");
    n
}

#[test]
fn the_setting_switches_at_run_time_and_defaults_to_off() {
    let scripts = Scripts::load();
    let s = Server::start();
    load(&s, &scripts);
    let mut c = s.conn();
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("lockmod.redisson-scripts").query(&mut c).expect("GET");
    assert_eq!(v, ["lockmod.redisson-scripts", "off"]);
    ok(&mut c, &strs(&acquire("a", OWNER)));
    assert_eq!(calls(&info(&mut c, "commandstats"), "lock.acquire"), 0);
    ok(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "native"]);
    ok(&mut c, &strs(&acquire("b", OWNER)));
    let stats = info(&mut c, "commandstats");
    assert_eq!((calls(&stats, "evalsha"), calls(&stats, "lock.acquire")), (1, 1));
    assert_eq!(field(&mut c, "redisson_lock_acquire"), 1);
    ok(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "off"]);
    ok(&mut c, &strs(&acquire("c", OWNER)));
    assert_eq!(calls(&info(&mut c, "commandstats"), "evalsha"), 2);
    assert_eq!(hgetall(&mut c, "b"), map(&[(OWNER, "1")]));
    let bad = call(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "fast"]);
    assert!(bad.is_err(), "{bad:?}");
    // CONFIG RESETSTAT resets the script counters with the others.
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(field(&mut c, "redisson_lock_acquire"), 0);
}

#[test]
fn inside_multi_exec_and_by_eval_the_replies_are_the_luas() {
    let scripts = Scripts::load();
    let (l, n) = (Server::start_plain(), native());
    load(&l, &scripts);
    load(&n, &scripts);
    for resp3 in [false, true] {
        let (mut lc, mut nc) = (RawConn::open(&l, resp3), RawConn::open(&n, resp3));
        let name = if resp3 { "m3" } else { "m2" };
        same(&mut lc, &mut nc, &["MULTI".to_string()]);
        for args in
            [acquire(name, OWNER), acquire(name, "other:1"), unlock(name, OWNER, "r1"), unlock(name, OWNER, "r1")]
        {
            same(&mut lc, &mut nc, &args);
        }
        // The refusal's PTTL may differ by a millisecond: compare it apart.
        let (le, ne) = (lc.call(&["EXEC"]), nc.call(&["EXEC"]));
        let (Raw::Agg(_, Some(lv)), Raw::Agg(_, Some(nv))) = (&le, &ne) else { panic!("{le:?} {ne:?}") };
        assert_eq!(lv.len(), 4);
        assert!(common::redisson::raw_match(&le, &ne, true), "{le:?} {ne:?}");
        assert_eq!((&lv[0], &lv[2], &lv[3]), (&nv[0], &nv[2], &nv[3]));
        // EVAL with the body: recognised by its SHA1, and a WRONGTYPE answered by the script.
        let body = scripts.body(ACQUIRE).text.clone();
        let eval = |k: &str| vec!["EVAL".to_string(), body.clone(), "1".into(), k.into(), "100".into(), OWNER.into()];
        same(&mut lc, &mut nc, &eval(&format!("{name}-e")));
        same(&mut lc, &mut nc, &["SET".into(), format!("{name}-s"), "x".into()]);
        let err = same(&mut lc, &mut nc, &eval(&format!("{name}-s")));
        assert!(matches!(&err, Raw::Line(b'-', e) if e.contains("WRONGTYPE") && e.contains("script")), "{err:?}");
    }
    let mut c = n.conn();
    let stats = info(&mut c, "commandstats");
    assert_eq!(calls(&stats, "lock.acquire"), 8);
    assert_eq!(calls(&stats, "lock.unlock"), 4);
    // The two WRONGTYPE calls ran the script (by EVAL: its body was never loaded by the client).
    assert_eq!((calls(&stats, "evalsha"), calls(&stats, "eval")), (0, 2));
    assert_eq!(field(&mut c, "redisson_fallbacks"), 2);
}

#[test]
fn on_a_replica_the_scripts_run_as_lua_and_accelerated_writes_replicate() {
    let scripts = Scripts::load();
    let primary = native();
    load(&primary, &scripts);
    let replica = primary.replica();
    load(&replica, &scripts);
    let mut rc = replica.conn();
    ok(&mut rc, &["CONFIG", "SET", "lockmod.redisson-scripts", "native"]);
    let mut pc = primary.conn();
    ok(&mut pc, &strs(&acquire("held", OWNER)));
    ok(&mut pc, &strs(&acquire("held", OWNER)));
    ok(&mut pc, &strs(&unlock("held", OWNER, "req")));
    // A call answered by running the script replicates the script's effects.
    ok(&mut pc, &["SET", "str", "x"]);
    assert!(call(&mut pc, &strs(&acquire("str", OWNER))).is_err());
    wait_replica(&mut pc);
    assert_eq!(hgetall(&mut rc, "held"), map(&[(OWNER, "1")]));
    assert_near(pttl(&mut rc, "held"), 30_000, 100);
    let latch: Option<String> = redis::cmd("GET").arg(common::names::latch("held", "req")).query(&mut rc).expect("GET");
    assert_eq!(latch.as_deref(), Some("0"));
    // On the replica: a refusal only reads, so the Lua answers it; a grant would write, and
    // the Lua's own READONLY error comes back, as without the module.
    let refused = call(&mut rc, &strs(&acquire("held", "other:1"))).expect("a refusal reads only");
    assert!(matches!(refused, Value::Int(t) if t > 0), "{refused:?}");
    let e = call(&mut rc, &strs(&acquire("free", OWNER))).expect_err("a grant writes");
    assert!(e.starts_with("READONLY") && e.contains("script"), "{e}");
    assert_eq!(calls(&info(&mut rc, "commandstats"), "lock.acquire"), 0);
    assert_eq!(field(&mut rc, "redisson_left_to_lua"), 2);
    assert_eq!(field(&mut rc, "redisson_lua_server_state"), 2, "counted by cause");
}

#[test]
fn over_maxmemory_every_script_is_left_to_lua() {
    let scripts = Scripts::load();
    let (l, n) = (Server::start_plain(), native());
    load(&l, &scripts);
    load(&n, &scripts);
    let (mut lc, mut nc) = (RawConn::open(&l, false), RawConn::open(&n, false));
    same(&mut lc, &mut nc, &acquire("held", OWNER));
    for c in [&mut lc, &mut nc] {
        c.call(&["CONFIG", "SET", "maxmemory", "1"]);
    }
    // Held by another: the Lua only reads and answers; free: the Lua's OOM error.
    let refused = lc.call(&acquire("held", "other:1"));
    assert!(common::redisson::raw_match(&refused, &nc.call(&acquire("held", "other:1")), true));
    same(&mut lc, &mut nc, &acquire("free", OWNER));
    // The unlock's first write (HINCRBY) is deny-oom in the script: OOM too, as Lua says it.
    let e = same(&mut lc, &mut nc, &unlock("held", OWNER, "r"));
    assert!(matches!(&e, Raw::Line(b'-', t) if t.starts_with("OOM") && t.contains("script")), "{e:?}");
    for c in [&mut lc, &mut nc] {
        c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    }
    same(&mut lc, &mut nc, &unlock("held", OWNER, "r2"));
    let mut c = n.conn();
    assert_eq!(field(&mut c, "redisson_left_to_lua"), 3);
    assert_eq!(field(&mut c, "redisson_lock_unlock"), 1);
}

#[test]
fn keys_the_module_would_not_derive_and_unknown_scripts_are_left_to_lua_and_counted() {
    let scripts = Scripts::load();
    let n = native();
    load(&n, &scripts);
    let mut c = n.conn();
    // A key prefix (Redisson's NameMapper) on the lock but not on the channel.
    let mut args = unlock("app:l", OWNER, "r");
    args[4] = "redisson_lock__channel:{l}".into();
    assert_eq!(call(&mut c, &strs(&args)), Ok(Value::Nil));
    // Sharded publishing configured in Redisson but not in the module.
    let mut args = unlock("l", OWNER, "r");
    args[9] = "SPUBLISH".into();
    assert_eq!(call(&mut c, &strs(&args)), Ok(Value::Nil));
    assert_eq!(field(&mut c, "redisson_left_to_lua"), 2);
    // A body not in the table, called the way Redisson calls its lock scripts.
    let changed = format!("{} ", scripts.body(ACQUIRE).text);
    ok(&mut c, &["EVAL", &changed, "1", "u", "30000", OWNER]);
    ok(&mut c, &["EVAL", "return 1", "1", "other", "x"]);
    assert_eq!(field(&mut c, "redisson_unknown_scripts"), 1);
    assert!(n.log().contains("a Redisson-like script not in lockmod's table ran as Lua"), "{}", n.log());
    assert_eq!(calls(&info(&mut c, "commandstats"), "lock.acquire"), 0);
}

#[test]
fn a_cluster_node_routes_and_refuses_as_for_the_script() {
    let scripts = Scripts::load();
    let mut servers = Vec::new();
    for module in [false, true] {
        let dir = std::env::temp_dir().join(format!("lockmod-redisson-cluster-{}-{module}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let conf = dir.join("nodes.conf");
        let _ = std::fs::remove_file(&conf);
        let conf = conf.display().to_string();
        let mut extra =
            vec!["--cluster-enabled", "yes", "--cluster-config-file", &conf, "--cluster-require-full-coverage", "no"];
        if module {
            extra.extend(["--lockmod.redisson-scripts", "native"]);
        }
        let s = Server::start_with(module, &extra);
        // This node serves the lower half of the slots only.
        ok(&mut s.conn(), &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
        load(&s, &scripts);
        servers.push(s);
    }
    for s in &servers {
        let mut c = s.conn();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !info(&mut c, "cluster").contains_key("cluster_enabled")
            || !redis::cmd("CLUSTER").arg("INFO").query::<String>(&mut c).expect("INFO").contains("cluster_state:ok")
        {
            assert!(std::time::Instant::now() < deadline, "the node's cluster state never became ok");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
    let (mut lc, mut nc) = (RawConn::open(&servers[0], false), RawConn::open(&servers[1], false));
    // `{b}` (slot 3300) is served, `{a}` (15495) is not, `x{}y` hashes whole and its channel
    // elsewhere.
    same(&mut lc, &mut nc, &acquire("{b}", OWNER));
    let served = same(&mut lc, &mut nc, &unlock("{b}", OWNER, "r"));
    assert_eq!(served, Raw::Line(b':', "1".into()));
    let unserved = same(&mut lc, &mut nc, &unlock("{a}", OWNER, "r"));
    assert!(matches!(&unserved, Raw::Line(b'-', e) if e.starts_with("CLUSTERDOWN")), "{unserved:?}");
    // A name with an empty tag, in a served slot: its channel hashes elsewhere.
    let mut c = servers[1].conn();
    let slot = |c: &mut redis::Connection, k: &str| -> i64 {
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(k).query(c).expect("KEYSLOT")
    };
    let cross = (0..100)
        .map(|i| format!("n{i}{{}}"))
        .find(|n| slot(&mut c, n) < 8192 && slot(&mut c, n) != slot(&mut c, &common::names::lock_channel(n)))
        .expect("a cross-slot name");
    let e = same(&mut lc, &mut nc, &unlock(&cross, OWNER, "r"));
    assert!(matches!(&e, Raw::Line(b'-', t) if t.starts_with("CROSSSLOT")), "{e:?}");
    let stats = info(&mut c, "commandstats");
    assert_eq!((calls(&stats, "lock.acquire"), calls(&stats, "lock.unlock")), (1, 1));
    assert_eq!(field(&mut c, "redisson_left_to_lua"), 1);
}

/// True when the server's command filter can name the calling client (Redis 7.2+, Valkey).
fn filter_sees_users(c: &mut redis::Connection) -> bool {
    let server = info(c, "server");
    let version = server.get("redis_version").cloned().unwrap_or_default();
    is_valkey() || !version.starts_with("7.0.")
}

#[test]
fn a_user_allowed_evalsha_but_not_the_module_commands_gets_what_lua_gives() {
    let scripts = Scripts::load();
    let (l, n) = (Server::start_plain(), native());
    let users = [
        // EVALSHA and the scripts' commands, not the module's.
        "ACL SETUSER scripts on >pw ~* &* +evalsha +exists +hexists +hincrby +pexpire +pttl +get +set +del +publish",
        // Everything but publishing: the unlock's PUBLISH fails inside the Lua.
        "ACL SETUSER nopub on >pw ~* &* +@all -publish",
    ];
    for s in [&l, &n] {
        load(s, &scripts);
        let mut c = s.conn();
        for u in users {
            let parts: Vec<&str> = u.split(' ').collect();
            ok(&mut c, &parts);
        }
    }
    let sees = filter_sees_users(&mut n.conn());
    for user in ["scripts", "nopub"] {
        let (mut lc, mut nc) = (RawConn::open(&l, false), RawConn::open(&n, false));
        for c in [&mut lc, &mut nc] {
            assert_eq!(c.call(&["AUTH", user, "pw"]), Raw::Line(b'+', "OK".into()));
        }
        let name = format!("acl-{user}");
        for args in [acquire(&name, OWNER), unlock(&name, OWNER, "r")] {
            assert_eq!(lc.call(&args), nc.call(&args), "{user}: {args:?}");
        }
    }
    let mut c = n.conn();
    let stats = info(&mut c, "commandstats");
    if sees {
        // `nopub` may run all of the acquire script: that one ran natively.
        assert_eq!(field(&mut c, "redisson_native_total"), 1);
        assert_eq!(field(&mut c, "redisson_left_to_lua"), 3);
        assert_eq!(calls(&stats, "lock.acquire"), 1);
    } else {
        // Redis 7.0: the filter cannot name the caller, and some user is restricted: every
        // script is left to Lua, for every user.
        assert_eq!(field(&mut c, "redisson_native_total"), 0);
        assert_eq!(field(&mut c, "redisson_left_to_lua"), 4);
        assert_eq!(calls(&stats, "lock.acquire"), 0);
    }
    assert_eq!(calls(&stats, "evalsha"), if sees { 3 } else { 4 });

    // Nobody restricted any more: the default user's scripts run natively again (on Redis 7.0
    // the first may still run as Lua, while the module finds that out).
    for s in [&l, &n] {
        ok(&mut s.conn(), &["ACL", "DELUSER", "scripts", "nopub"]);
    }
    let (before, lua_before) = (field(&mut c, "redisson_native_total"), field(&mut c, "redisson_left_to_lua"));
    let (mut lc, mut nc) = (RawConn::open(&l, false), RawConn::open(&n, false));
    for name in ["open-1", "open-2"] {
        for args in [acquire(name, OWNER), unlock(name, OWNER, "r")] {
            same(&mut lc, &mut nc, &args);
        }
    }
    let native = field(&mut c, "redisson_native_total") - before;
    let lua = field(&mut c, "redisson_left_to_lua") - lua_before;
    assert_eq!(native + lua, 4);
    assert!(native >= 3 && lua <= u64::from(!sees), "native {native}, left to Lua {lua}");
    let stats = info(&mut c, "commandstats");
    assert_eq!(calls(&stats, "lock.unlock"), 2, "{stats:?}");
}

#[test]
fn a_tenant_denied_the_fair_queue_gets_what_lua_gives_and_the_acl_log_stays_empty() {
    let scripts = Scripts::load();
    let (l, n) = (Server::start_plain(), native());
    // The lock, its latches and channel (passed as keys too), not the fair queue the native
    // acquire reads.
    let keys = ["~q:*", "~redisson_unlock_latch:*", "~redisson_lock__channel:*"];
    let rules = [&["ACL", "SETUSER", "tenant", "on", ">pw"][..], &keys, &["&*", "+@all"]].concat();
    for s in [&l, &n] {
        load(s, &scripts);
        ok(&mut s.conn(), &rules);
    }
    let sees = filter_sees_users(&mut n.conn());
    let (mut lc, mut nc) = (RawConn::open(&l, false), RawConn::open(&n, false));
    for c in [&mut lc, &mut nc] {
        assert_eq!(c.call(&["AUTH", "tenant", "pw"]), Raw::Line(b'+', "OK".into()));
    }
    for args in [acquire("q:1", OWNER), unlock("q:1", OWNER, "r")] {
        let (lr, nr) = (lc.call(&args), nc.call(&args));
        assert_eq!(lr, nr, "{args:?}");
    }
    assert_eq!(int(&ok(&mut n.conn(), &["EXISTS", "q:1"])), 0);
    let mut c = n.conn();
    if sees {
        // The acquire was left to Lua by the filter (no denial logged); the unlock ran natively.
        assert_eq!(field(&mut c, "redisson_left_to_lua"), 1);
        assert_eq!(field(&mut c, "redisson_native_total"), 1);
    } else {
        // Redis 7.0: a user is restricted, so every script is left to Lua.
        assert_eq!(field(&mut c, "redisson_left_to_lua"), 2);
        assert_eq!(field(&mut c, "redisson_native_total"), 0);
    }
    assert_eq!(ok(&mut c, &["ACL", "LOG"]), Value::Array(vec![]));
}

const RENEW_TASK: &str = "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635";
const RLOCK: &str = "95553a6ff11176c18e71344e89d116b06fd6f753";

/// Issue 23: the write lock's watchdog renews with the reentrant renewal, for `owner:write`.
/// Natively it must renew as the Lua does (the native `LOCK.RENEW` refuses a read-write lock),
/// and the new expiry must reach a replica as an absolute time.
#[test]
fn the_write_locks_watchdog_renewal_renews_natively_and_replicates() {
    let scripts = Scripts::load();
    let primary = native();
    load(&primary, &scripts);
    let replica = primary.replica();
    let (mut pc, mut rc) = (primary.conn(), replica.conn());
    ok(&mut pc, &["RWLOCK.WLOCK", "w", OWNER, "30000"]);
    let writer = format!("{OWNER}:write");
    let before = field(&mut pc, "redisson_native_total");
    let since = common::diff::now_ms();
    let renewed = call(&mut pc, &["EVALSHA", RENEW_TASK, "1", "w", "60000", &writer]).expect("renewal");
    assert_eq!(renewed, Value::Array(vec![Value::Int(1)]));
    assert_eq!(field(&mut pc, "redisson_native_total"), before + 1, "ran natively");
    assert_lease(&mut pc, "w", 60_000, since);
    // Another owner's field is not there: nothing renewed.
    let other = call(&mut pc, &["EVALSHA", RENEW_TASK, "1", "w", "90000", "other:1:write"]).expect("renewal");
    assert_eq!(other, Value::Array(vec![Value::Int(0)]));
    assert_lease(&mut pc, "w", 60_000, since);
    wait_replica(&mut pc);
    assert_eq!(pexpiretime(&mut rc, "w"), pexpiretime(&mut pc, "w"), "the replica's expiry is the primary's");
    assert_eq!(hgetall(&mut rc, "w"), map(&[("mode", "write"), (&writer, "1")]));
}

/// A writer parked with BLOCK makes the native `RWLOCK.RLOCK` refuse new readers; Redisson's
/// read-lock script cannot see it and grants the read, so its call is left to Lua.
#[test]
fn a_redisson_reader_is_granted_as_by_lua_while_a_native_writer_is_parked() {
    let scripts = Scripts::load();
    let s = native();
    load(&s, &scripts);
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "rw", "reader:1", "30000"]);
    let mut parked_writer = s.conn();
    let waiter = std::thread::spawn(move || {
        let v: Value = redis::cmd("RWLOCK.WLOCK")
            .arg("rw")
            .arg("writer:1")
            .arg("30000")
            .arg("BLOCK")
            .arg("20000")
            .query(&mut parked_writer)
            .expect("WLOCK");
        v
    });
    common::parked::wait_blocked(&mut c, 1);
    // A new native reader waits behind the writer.
    assert!(matches!(ok(&mut c, &["RWLOCK.RLOCK", "rw", "reader:2", "30000"]), Value::Int(t) if t > 0));
    // Redisson's reader is granted, as the Lua grants it.
    let prefix = common::names::read_timeout_prefix("rw", OWNER);
    let granted = call(&mut c, &["EVALSHA", RLOCK, "2", "rw", &prefix, "30000", OWNER, &format!("{OWNER}:write")]);
    assert_eq!(granted, Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, "rw"), map(&[("mode", "read"), ("reader:1", "1"), (OWNER, "1")]));
    assert_eq!(field(&mut c, "redisson_fallbacks") + field(&mut c, "redisson_left_to_lua"), 1);
    assert_eq!(field(&mut c, "redisson_lua_module_rule"), 1, "counted by cause");
    ok(&mut c, &["RWLOCK.FORCEUNLOCK", "rw", "READ"]);
    assert_eq!(waiter.join().expect("waiter"), Value::Nil, "the parked writer gets the lock");
}
