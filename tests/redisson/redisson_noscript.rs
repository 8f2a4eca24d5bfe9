//! `lockmod.redisson-scripts native` and the script cache: an `EVALSHA` of a Redisson script
//! this server has not loaded (never, or not since `SCRIPT FLUSH`, or evicted) is answered
//! `NOSCRIPT` by Redis, as without the module, and changes nothing; once the script is
//! loaded (`SCRIPT LOAD`, `EVAL`, `EVAL_RO`) the same call runs natively. Every reply is
//! compared, as RESP bytes in RESP2 and RESP3, with a server without the module.

use crate::common;

use common::redisson::{calls, field, info, Raw, RawConn, Scripts};
use common::*;

const OWNER: &str = "6f1c2d3e-4b5a-4c6d-8e7f-0123456789ab:1";
const ACQUIRE: &str = "149c5a8bf18676fd99e9e6e24923bd64d9b62f94";
const RENEW: &str = "8e19a1ddbdee9138df9f32a480c57addab4353d1";

fn native() -> Server {
    Server::start_with(true, &["--lockmod.redisson-scripts", "native"])
}

fn acquire(name: &str) -> Vec<String> {
    ["EVALSHA", ACQUIRE, "1", name, "30000", OWNER].iter().map(|s| s.to_string()).collect()
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The lua server and the native one, a raw connection to each.
struct Pair {
    lua: Server,
    nat: Server,
}

impl Pair {
    fn new() -> Pair {
        Pair { lua: Server::start_plain(), nat: native() }
    }

    fn conns(&self, resp3: bool) -> (RawConn, RawConn) {
        (RawConn::open(&self.lua, resp3), RawConn::open(&self.nat, resp3))
    }

    /// Redisson acquires the native side ran as `LOCK.ACQUIRE` (not as Lua).
    fn native_runs(&self) -> u64 {
        field(&mut self.nat.conn(), "redisson_lock_acquire")
    }

    fn same_keyspace(&self) {
        let (mut l, mut n) = (self.lua.conn(), self.nat.conn());
        let (lk, nk) = (keys(&mut l), keys(&mut n));
        assert_eq!(lk, nk, "keyspaces differ");
        for k in &lk {
            assert_eq!(hgetall(&mut l, k), hgetall(&mut n, k), "{k}");
        }
    }
}

/// Runs `args` on both and asserts the replies are the same bytes.
fn same(lc: &mut RawConn, nc: &mut RawConn, args: &[String]) -> Raw {
    let (l, n) = (lc.call(args), nc.call(args));
    assert_eq!(l, n, "{args:?}");
    n
}

fn is_noscript(r: &Raw) -> bool {
    matches!(r, Raw::Line(b'-', e) if e.starts_with("NOSCRIPT No matching script."))
}

#[test]
fn after_script_flush_an_evalsha_answers_noscript_until_load_eval_or_eval_ro_caches_it() {
    let scripts = Scripts::load();
    let body = scripts.body(ACQUIRE).text.clone();
    let p = Pair::new();
    for resp3 in [false, true] {
        let (mut lc, mut nc) = p.conns(resp3);
        let name = |s: &str| format!("{s}{}", if resp3 { 3 } else { 2 });
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "FLUSH"]));
        // Not loaded on this server: NOSCRIPT, nothing written, nothing run natively.
        let before = p.native_runs();
        let r = same(&mut lc, &mut nc, &acquire(&name("a")));
        assert!(is_noscript(&r), "{r:?}");
        p.same_keyspace();
        assert_eq!(p.native_runs(), before);
        // SCRIPT LOAD: the same call runs natively.
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "LOAD", &body]));
        let r = same(&mut lc, &mut nc, &acquire(&name("a")));
        assert!(!matches!(r, Raw::Line(b'-', _)), "{r:?}");
        assert_eq!(p.native_runs(), before + 1);
        // SCRIPT FLUSH (either mode): NOSCRIPT again, the lock untouched.
        let mode = if resp3 { "ASYNC" } else { "SYNC" };
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "FLUSH", mode]));
        let r = same(&mut lc, &mut nc, &acquire(&name("b")));
        assert!(is_noscript(&r), "{r:?}");
        p.same_keyspace();
        // EVAL of the body caches it (the first one runs as Lua: it is what caches it).
        let eval = owned(&["EVAL", &body, "1", &name("c"), "30000", OWNER]);
        same(&mut lc, &mut nc, &eval);
        same(&mut lc, &mut nc, &acquire(&name("b")));
        assert_eq!(p.native_runs(), before + 2);
        // EVAL_RO caches it too, though the script's write fails there.
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "FLUSH"]));
        let r = same(&mut lc, &mut nc, &owned(&["EVAL_RO", &body, "1", &name("d"), "30000", OWNER]));
        assert!(matches!(r, Raw::Line(b'-', _)), "{r:?}");
        same(&mut lc, &mut nc, &acquire(&name("d")));
        assert_eq!(p.native_runs(), before + 3);
        p.same_keyspace();
    }
    let mut c = p.nat.conn();
    assert_eq!(field(&mut c, "redisson_noscript"), 4);
}

#[test]
fn a_flush_in_a_transaction_is_seen_where_it_runs() {
    let scripts = Scripts::load();
    let body = scripts.body(ACQUIRE).text.clone();
    let p = Pair::new();
    for resp3 in [false, true] {
        let (mut lc, mut nc) = p.conns(resp3);
        let (mut lc2, mut nc2) = p.conns(resp3);
        let name = |s: &str| format!("{s}{}", if resp3 { 3 } else { 2 });
        let load = owned(&["SCRIPT", "LOAD", &body]);
        // An EVALSHA queued before the flush runs; the one after it gets NOSCRIPT.
        same(&mut lc, &mut nc, &load);
        same(&mut lc, &mut nc, &owned(&["MULTI"]));
        same(&mut lc, &mut nc, &acquire(&name("t")));
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "FLUSH"]));
        same(&mut lc, &mut nc, &acquire(&name("u")));
        let r = same(&mut lc, &mut nc, &owned(&["EXEC"]));
        let Raw::Agg(_, Some(v)) = &r else { panic!("{r:?}") };
        assert!(!is_noscript(&v[0]) && is_noscript(&v[2]), "{r:?}");
        p.same_keyspace();
        // Another client flushes while a transaction with the EVALSHA is queued.
        same(&mut lc, &mut nc, &load);
        same(&mut lc, &mut nc, &acquire(&name("v")));
        same(&mut lc, &mut nc, &owned(&["MULTI"]));
        same(&mut lc, &mut nc, &acquire(&name("w")));
        same(&mut lc2, &mut nc2, &owned(&["SCRIPT", "FLUSH"]));
        let r = same(&mut lc, &mut nc, &owned(&["EXEC"]));
        let Raw::Agg(_, Some(v)) = &r else { panic!("{r:?}") };
        assert!(is_noscript(&v[0]), "{r:?}");
        // A flush queued by one client, then the script loaded and used by another before
        // that EXEC: loaded and native until the EXEC, NOSCRIPT after it.
        same(&mut lc, &mut nc, &owned(&["MULTI"]));
        same(&mut lc, &mut nc, &owned(&["SCRIPT", "FLUSH"]));
        same(&mut lc2, &mut nc2, &load);
        let before = p.native_runs();
        same(&mut lc2, &mut nc2, &acquire(&name("x")));
        assert_eq!(p.native_runs(), before + 1);
        same(&mut lc, &mut nc, &owned(&["EXEC"]));
        let r = same(&mut lc2, &mut nc2, &acquire(&name("y")));
        assert!(is_noscript(&r), "{r:?}");
        p.same_keyspace();
    }
}

#[test]
fn module_load_at_run_time_knows_the_scripts_loaded_before_it() {
    let scripts = Scripts::load();
    let (lua, nat) = (Server::start_plain(), Server::start_plain());
    for s in [&lua, &nat] {
        let mut c = s.conn();
        let _: String =
            redis::cmd("SCRIPT").arg("LOAD").arg(&scripts.body(ACQUIRE).text).query(&mut c).expect("SCRIPT LOAD");
    }
    let mut c = nat.conn();
    let path = module_path().display().to_string();
    ok(&mut c, &["MODULE", "LOADEX", &path, "CONFIG", "lockmod.redisson-scripts", "native"]);
    for resp3 in [false, true] {
        let (mut lc, mut nc) = (RawConn::open(&lua, resp3), RawConn::open(&nat, resp3));
        let name = if resp3 { "m3" } else { "m2" };
        same(&mut lc, &mut nc, &acquire(name));
        // The watchdog's renewal was never loaded: NOSCRIPT, decided without the module command.
        let renew = owned(&["EVALSHA", RENEW, "1", name, "30000", OWNER]);
        let r = same(&mut lc, &mut nc, &renew);
        assert!(is_noscript(&r), "{r:?}");
    }
    let stats = info(&mut c, "commandstats");
    assert_eq!((calls(&stats, "lock.acquire"), calls(&stats, "lock.renew")), (2, 0));
    assert_eq!(field(&mut c, "redisson_noscript"), 2);
    assert_eq!(hgetall(&mut c, "m2"), map(&[(OWNER, "1")]));
}

#[test]
fn a_script_evicted_by_other_evals_answers_as_without_the_module() {
    // Redis 7.4+ and Valkey 8+ keep at most 500 scripts created by EVAL (oldest out); 7.0
    // keeps them all. Either way both servers must answer the same.
    let scripts = Scripts::load();
    let body = scripts.body(ACQUIRE).text.clone();
    let p = Pair::new();
    let (mut lc, mut nc) = p.conns(false);
    same(&mut lc, &mut nc, &owned(&["EVAL", &body, "1", "e0", "30000", OWNER]));
    same(&mut lc, &mut nc, &acquire("e1"));
    for i in 0..520 {
        same(&mut lc, &mut nc, &owned(&["EVAL", &format!("return {i}"), "0"]));
    }
    let evicted: u64 =
        info(&mut p.lua.conn(), "stats").get("evicted_scripts").and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(!is_valkey() || evicted > 0, "Valkey evicts: {evicted}");
    let r = same(&mut lc, &mut nc, &acquire("e2"));
    assert_eq!(is_noscript(&r), evicted > 0, "{r:?}");
    p.same_keyspace();
    // Loaded by SCRIPT LOAD it is never evicted, and runs natively after the other EVALs.
    same(&mut lc, &mut nc, &owned(&["SCRIPT", "LOAD", &body]));
    for i in 0..520 {
        same(&mut lc, &mut nc, &owned(&["EVAL", &format!("return {} + 1", i), "0"]));
    }
    let before = p.native_runs();
    same(&mut lc, &mut nc, &acquire("e3"));
    assert_eq!(p.native_runs(), before + 1);
    p.same_keyspace();
}

#[test]
fn with_script_renamed_the_scripts_run_as_lua() {
    let scripts = Scripts::load();
    let body = scripts.body(ACQUIRE).text.clone();
    let renamed = ["--rename-command", "SCRIPT", "SCRIPTX"];
    let lua = Server::start_with(false, &renamed);
    let nat = Server::start_with(true, &[&["--lockmod.redisson-scripts", "native"][..], &renamed[..]].concat());
    let (mut lc, mut nc) = (RawConn::open(&lua, true), RawConn::open(&nat, true));
    let r = same(&mut lc, &mut nc, &acquire("r"));
    assert!(is_noscript(&r), "{r:?}");
    same(&mut lc, &mut nc, &owned(&["SCRIPTX", "LOAD", &body]));
    same(&mut lc, &mut nc, &acquire("r"));
    same(&mut lc, &mut nc, &owned(&["SCRIPTX", "FLUSH"]));
    let r = same(&mut lc, &mut nc, &acquire("s"));
    assert!(is_noscript(&r), "{r:?}");
    let mut c = nat.conn();
    let stats = info(&mut c, "commandstats");
    assert_eq!((calls(&stats, "evalsha"), calls(&stats, "lock.acquire")), (3, 0));
    assert_eq!(field(&mut c, "redisson_left_to_lua"), 3);
    assert!(nat.log().contains("SCRIPT is renamed"));
    assert_eq!(keys(&mut c), keys(&mut lua.conn()));
}
