//! Every body of Redisson's rate-limiter scripts (`RRateLimiter`, its `RedissonExpirable`
//! helpers, `RGcra`; every release 3.17.0 to HEAD), with the KEYS and ARGV its method sends,
//! on every kind of limiter state, run as Lua (`lockmod.redisson-scripts off`) and by a server
//! with `native`: replies (RESP2, and RESP3 on a few states), keyspaces (members byte for
//! byte: the native side must write the Lua's member from ARGV's random bytes; TTLs within
//! the tolerance) and keyspace events must be equal. ARGV's time is fixed, the same on both
//! sides.
//!
//! States (`common/rate_states.rs`): a new window, fresh, full, partly expired, expired whole
//! (5 grants, and 100), after a Redisson release, a low value, grants past the rate, grants
//! without a value, 0-permit grants, a negative score, a malformed member, values Lua reads
//! and the module does not (`" 3"`, `2.5`), a non-number, a value past 2^53, other types
//! under the value or the grants, a 0 value with no grant, keys with TTLs of their own; under
//! OVERALL, PER_CLIENT (beside an overall state it must leave alone), a keep-alive, a TTL on
//! the hash (3.37), no `keepAliveTime` (before 3.38), and odd hashes (`rate " 10"`, a decimal
//! interval, another `type`, a `keepAliveTime` that is no number, another type, none).
//!
//! The run also measures which calls ran natively (`INFO lockmod`): on the states Redisson's
//! own calls make, every call Redisson's methods send must; every call run as Lua must be
//! counted under exactly one `redisson_lua_<cause>`. The summary printed at the end says
//! which (body, state) pairs went to Lua, and why.

use crate::common;

use common::diff::now_ms;
use common::rate_calls::{self as rc, role, Role};
use common::rate_pair::{shown, RatePair};
use common::rate_states as st;
use common::ratelimiter::{self as rl, evalsha};
use common::redisson::{info, raw_match, Raw};
use common::script_findings::{counters, Case, Findings, CAUSES};

#[test]
fn every_redisson_ratelimiter_body_answers_as_its_lua_on_every_limiter_state() {
    let started = std::time::Instant::now();
    let scripts = rl::load();
    let mut pair = RatePair::new(&scripts);
    let mut f = Findings::default();
    // `RATE_STATES_ONLY=sha-prefix,...` runs those bodies alone (to look into one).
    let only = std::env::var("RATE_STATES_ONLY").ok();
    let picked = |sha: &str| only.as_deref().is_none_or(|o| o.split(',').any(|p| sha.starts_with(p)));
    for (i, _) in (0..200).enumerate() {
        pair.sent.insert(st::setup_random(i));
    }
    pair.sent.insert(st::setup_random(900));
    for k in 0..16 {
        pair.sent.insert(st::call_random(k, false));
        pair.sent.insert(st::call_random(k, true));
    }
    for body in scripts.bodies.iter().filter(|b| picked(&b.sha)) {
        let r = role(&body.sha);
        for state in st::states().into_iter().filter(|s| rc::runs_on(r, *s)) {
            for c in rc::calls(r, state, now_ms()) {
                let resp3s: &[bool] = if state.window == st::Window::Fresh && state.hash == st::Hash::Overall {
                    &[false, true]
                } else {
                    &[false]
                };
                for &resp3 in resp3s {
                    pair.flush();
                    pair.setup(&state.setup());
                    let before = counters(&mut pair.nc);
                    let (lua, nat) = pair.call(&c.evalsha(&body.sha), resp3);
                    let after = counters(&mut pair.nc);
                    let what = format!(
                        "{} {r:?} [{}] on {:?}/{:?}{}",
                        &body.sha[..8],
                        c.label,
                        state.hash,
                        state.window,
                        if resp3 { " (RESP3)" } else { "" }
                    );
                    let case = Case {
                        body: format!("{} {r:?}", &body.sha[..8]),
                        state: format!("{:?}/{:?} [{}]", state.hash, state.window, c.label),
                        same: raw_match(&lua, &nat, false),
                        keyspace: pair.difference(None),
                        lua: &lua,
                        native: &nat,
                        ordinary: rc::ordinary(state, &c),
                        what,
                    };
                    f.note(case, before, after);
                }
            }
        }
        if matches!(r, Role::GcraTrySet | Role::GcraSet | Role::GcraAcquire) {
            gcra_states(&mut pair, &body.sha, r, &mut f);
        }
    }
    f.report(started.elapsed(), 1_500, "RATE_STATES_ONLY");
}

/// The `GCRA` key and config hash of the `RGcra` states.
const GNAME: &str = "glim";

fn gconfig() -> String {
    rl::suffix(GNAME, "config")
}

/// `RGcra`'s bodies on its states: no config, a config (`period` `60` or `0.25`), a config
/// the Lua's `GCRA` refuses (`maxBurst -1`), an odd period (`6e1`), another type under the
/// config; no TAT, a TAT, another type under it. The TAT is a time read from each server's
/// clock (compared within the tolerance), and so are the reply's last two fields (whole
/// seconds, rounded up: compared within 1).
fn gcra_states(pair: &mut RatePair, sha: &str, r: Role, f: &mut Findings) {
    let b = |s: &str| s.as_bytes().to_vec();
    let configs: [(&str, Option<[&str; 3]>); 6] = [
        ("no config", None),
        ("period 60", Some(["4", "10", "60"])),
        ("period 0.25", Some(["4", "10", "0.25"])),
        ("maxBurst -1", Some(["-1", "10", "60"])),
        ("period 6e1", Some(["4", "10", "6e1"])),
        ("config not a hash", None),
    ];
    let tats = ["no TAT", "TAT", "TAT not a number"];
    for (label, config) in configs {
        for tat in tats {
            let mut setup: Vec<Vec<Vec<u8>>> = vec![];
            if let Some([m, rt, p]) = config {
                setup.push(vec![b("HSET"), b(&gconfig()), b("maxBurst"), b(m), b("rate"), b(rt), b("period"), b(p)]);
            }
            if label == "config not a hash" {
                setup.push(vec![b("SET"), b(&gconfig()), b("x")]);
            }
            match tat {
                "TAT" => setup.push(vec![b("GCRA"), b(GNAME), b("4"), b("10"), b("60"), b("TOKENS"), b("3")]),
                "TAT not a number" => setup.push(vec![b("SET"), b(GNAME), b("abc")]),
                _ => {}
            }
            let calls: Vec<GcraCall> = match r {
                Role::GcraTrySet => vec![("4 10 60", vec![gconfig()], vec![b("4"), b("10"), b("60")])],
                Role::GcraSet => vec![("5 20 30", vec![gconfig(), GNAME.into()], vec![b("5"), b("20"), b("30")])],
                _ => ["1", "3", "0", "1.0"]
                    .iter()
                    .map(|t| (*t, vec![gconfig(), GNAME.to_string()], vec![b(t)]))
                    .collect(),
            };
            for (clabel, keys, argv) in calls {
                pair.flush();
                pair.setup(&setup);
                let before = counters(&mut pair.nc);
                let (lua, nat) = pair.call(&evalsha(sha, &keys, &argv), false);
                let after = counters(&mut pair.nc);
                let what = format!("{} {r:?} [{clabel}] on {label}/{tat}", &sha[..8]);
                // Ordinary: a config `RGcra` writes, and a call it sends (tokens of 1 up).
                let ordinary = matches!(label, "period 60" | "period 0.25")
                    && tat != "TAT not a number"
                    && !matches!(clabel, "0" | "1.0");
                let case = Case {
                    body: format!("{} {r:?}", &sha[..8]),
                    state: format!("{label}/{tat} [{clabel}]"),
                    same: gcra_match(&lua, &nat),
                    keyspace: pair.difference(Some(GNAME)),
                    lua: &lua,
                    native: &nat,
                    ordinary,
                    what,
                };
                f.note(case, before, after);
            }
        }
    }
}

/// A call of an `RGcra` body: its label, KEYS and ARGV.
type GcraCall = (&'static str, Vec<String>, Vec<Vec<u8>>);

/// `GCRA`'s five integers: the last two (whole seconds from each server's clock) within 1.
fn gcra_match(a: &Raw, b: &Raw) -> bool {
    match (a, b) {
        (Raw::Agg(t, Some(x)), Raw::Agg(u, Some(y))) if t == u && x.len() == 5 && y.len() == 5 => {
            let n = |r: &Raw| match r {
                Raw::Line(b':', s) => s.parse::<i64>().ok(),
                _ => None,
            };
            (0..5).all(|i| match (n(&x[i]), n(&y[i])) {
                (Some(p), Some(q)) if i >= 3 => (p - q).abs() <= 1,
                (Some(p), Some(q)) => p == q,
                _ => false,
            })
        }
        _ => raw_match(a, b, false),
    }
}

/// The current release's bodies run natively on a primary with a replica: the replica ends
/// with the primary's keyspace (members byte for byte, expiries as absolute times within the
/// tolerance), and so does the primary after `DEBUG RELOAD`.
#[test]
fn native_bodies_replicate_as_their_effects_and_survive_a_reload() {
    let scripts = rl::load();
    let primary = common::Server::start_with(true, &["--lockmod.redisson-scripts", "native"]);
    let replica = primary.replica();
    let (mut p, mut r) = (primary.conn(), replica.conn());
    rl::load_on(&mut p, &scripts);
    let keys = st::keys();
    let b = |s: &str| s.as_bytes().to_vec();
    let now = st::NOW;
    let mut calls: Vec<Vec<Vec<u8>>> = vec![
        evalsha(rl::TRY_SET_RATE[2], &[st::NAME.into()], &[b("10"), b("1000"), b("0"), b("600000")]),
        evalsha(rl::EXPIRE, &keys, &[b("600000"), b("")]),
    ];
    for i in 0..40i64 {
        let random = st::call_random((i % 16) as u8, false);
        calls.push(evalsha(
            rl::ACQUIRE[3],
            &keys,
            &[(1 + i % 3).to_string().into_bytes(), (now + 97 * i).to_string().into_bytes(), random],
        ));
        if i % 7 == 0 {
            calls.push(evalsha(rl::AVAILABLE, &keys, &[(now + 97 * i).to_string().into_bytes()]));
            calls.push(evalsha(rl::RELEASE, &keys, &[b("2")]));
        }
    }
    calls.push(evalsha(
        rl::SET_OR_UPDATE,
        &keys,
        &[b("20"), b("1000"), b("0"), b("0"), (now + 5000).to_string().into_bytes(), b("1"), b("0")],
    ));
    calls.push(evalsha(rl::CLEAR_EXPIRE, &keys, &[]));
    calls.push(evalsha(rl::GCRA_TRY_SET, &[gconfig()], &[b("4"), b("10"), b("60")]));
    calls.push(evalsha(rl::GCRA_ACQUIRE, &[gconfig(), GNAME.into()], &[b("2")]));
    let before = counters(&mut p).0;
    for c in &calls {
        rl::run(&mut p, c).unwrap_or_else(|e| panic!("{}: {e}", shown(c)));
    }
    assert_eq!(counters(&mut p).0 - before, calls.len() as u64, "every call ran natively");
    common::wait_replica(&mut p);
    let none = Default::default();
    let (dp, dr) = (common::rate_pair::dump(&mut p, &none), common::rate_pair::dump(&mut r, &none));
    assert!(dp.len() >= 4, "{dp:?}");
    assert_eq!(common::diff::keyspace_difference(("primary", &dp), ("replica", &dr), 0), None);
    let _: () = redis::cmd("DEBUG").arg("RELOAD").query(&mut p).expect("DEBUG RELOAD");
    let reloaded = common::rate_pair::dump(&mut p, &none);
    assert_eq!(common::diff::keyspace_difference(("before", &dp), ("after DEBUG RELOAD", &reloaded), 0), None);
}

/// A user ACL denies a command the body runs inside (`ZADD`): the call runs as Lua, so the user
/// gets the Lua's ACL error, after the writes the Lua made before it, counted under `acl`. An unrestricted user's
/// call runs natively where the filter can name the caller (Redis 7.2+, Valkey); on Redis 7.0
/// any restricted user sends every script to Lua.
#[test]
fn a_user_denied_a_command_of_the_body_gets_what_lua_gives() {
    let scripts = rl::load();
    let mut pair = RatePair::new(&scripts);
    let sees = common::is_valkey() || !info(&mut pair.nc, "server")["redis_version"].starts_with("7.0.");
    let b = |s: &str| s.as_bytes().to_vec();
    let keys = st::keys();
    for c in [&mut pair.lc, &mut pair.nc] {
        common::ok(c, &["ACL", "SETUSER", "nozadd", "on", ">pw", "~*", "&*", "+@all", "-zadd"]);
    }
    let set = evalsha(rl::TRY_SET_RATE[2], &[st::NAME.into()], &[b("10"), b("1000"), b("0"), b("0")]);
    pair.call(&set, false);
    let before = counters(&mut pair.nc);
    let take = |r: u8| evalsha(rl::ACQUIRE[3], &keys, &[b("1"), b(&st::NOW.to_string()), st::call_random(r, false)]);
    for (user, random) in [("nozadd", 1), ("default", 2)] {
        let mut conns = [&pair.lua, &pair.native].map(|s| common::redisson::RawConn::open(s, false));
        if user != "default" {
            for c in &mut conns {
                assert_eq!(c.call(&["AUTH", user, "pw"]), Raw::Line(b'+', "OK".into()));
            }
        }
        let args = take(random);
        let (l, n) = (conns[0].call(&args), conns[1].call(&args));
        assert_eq!(l, n, "{user}");
        if user == "nozadd" {
            // The script's own ACL error (its wording differs by server).
            assert!(matches!(&l, Raw::Line(b'-', e) if e.contains("zadd") || e.contains("can't run")), "{l:?}");
        }
    }
    assert_eq!(pair.difference(None), None);
    let after = counters(&mut pair.nc);
    let acl = CAUSES.iter().position(|c| *c == "acl").unwrap_or(0);
    assert_eq!(after.1[acl] - before.1[acl], if sees { 1 } else { 2 });
    assert_eq!(after.0 - before.0, u64::from(sees));
}

/// A client parked with `RATELIMITER.ACQUIRE ... BLOCK` is served by a Redisson body run
/// natively, as by any write, at once (not at the next poll): the release body (3.52+) only
/// raises the value, so the waiter looks at the window, finds it full and stays (issue 36: the
/// value is not taken for a release; the module writes the window's count back); the
/// setOrUpdate body (4.4+) raising the rate with KEEPSTATE frees permits, and the waiter gets
/// them.
#[test]
fn a_body_run_natively_serves_a_parked_waiter_at_once() {
    let scripts = rl::load();
    let s = common::Server::start_with(true, &["--lockmod.redisson-scripts", "native"]);
    let mut c = s.conn();
    rl::load_on(&mut c, &scripts);
    common::ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "3", "600000"]);
    assert_eq!(common::ok(&mut c, &["RATELIMITER.ACQUIRE", "r", "3"]), common::Value::Nil);
    let mut w = s.conn();
    let waiter = std::thread::spawn(move || common::call(&mut w, &["RATELIMITER.ACQUIRE", "r", "2", "BLOCK", "20000"]));
    common::parked::wait_blocked(&mut c, 1);
    let before = counters(&mut c).0;
    let keys = rl::keys("r", "java-client");
    assert_eq!(rl::run(&mut c, &evalsha(rl::RELEASE, &keys, &[b"2".to_vec()])), Ok(common::Value::Nil));
    assert_eq!(counters(&mut c).0, before + 1, "the release body ran natively");
    // Served in that very command: the waiter looked, and wrote the window's count back.
    assert_eq!(common::ok(&mut c, &["GET", "{r}:value"]), common::Value::BulkString(b"0".to_vec()));
    common::parked::wait_blocked(&mut c, 1);
    let (secs, us): (i64, i64) = redis::cmd("TIME").query(&mut c).expect("TIME");
    let b = |s: &str| s.as_bytes().to_vec();
    let argv = [b("5"), b("600000"), b("0"), b("0"), b(&(secs * 1000 + us / 1000).to_string()), b("1"), b("0")];
    assert_eq!(rl::run(&mut c, &evalsha(rl::SET_OR_UPDATE, &keys, &argv)), Ok(common::Value::Int(1)));
    assert_eq!(counters(&mut c).0, before + 2, "the setOrUpdate body ran natively");
    assert_eq!(waiter.join().expect("thread"), Ok(common::Value::Nil));
    assert_eq!(common::ok(&mut c, &["GET", "{r}:value"]), common::Value::BulkString(b"0".to_vec()));
}

/// Where the server has a `GCRA` of its own (here `ECHO` renamed, as tests/rate/gcra_server_has.rs
/// makes one), `RGcra`'s bodies call that command from their Lua: the module leaves all three
/// to it, counted as `not_accelerated`, and its own rate limiter's bodies still run natively.
#[test]
fn rgcras_bodies_are_left_to_a_servers_own_gcra() {
    let scripts = rl::load();
    let s =
        common::Server::start_with(true, &["--rename-command", "ECHO", "GCRA", "--lockmod.redisson-scripts", "native"]);
    let mut c = s.conn();
    rl::load_on(&mut c, &scripts);
    let b = |s: &str| s.as_bytes().to_vec();
    let before = counters(&mut c);
    let set = evalsha(rl::GCRA_TRY_SET, &[gconfig()], &[b("4"), b("10"), b("60")]);
    assert_eq!(rl::run(&mut c, &set), Ok(common::Value::Int(1)));
    let take = evalsha(rl::GCRA_ACQUIRE, &[gconfig(), GNAME.into()], &[b("1")]);
    // The server's `GCRA` (`ECHO`) refuses five arguments: the Lua's error, as without the module.
    assert!(rl::run(&mut c, &take).is_err());
    let limiter = evalsha(rl::TRY_SET_RATE[2], &[st::NAME.into()], &[b("10"), b("1000"), b("0"), b("0")]);
    assert_eq!(rl::run(&mut c, &limiter), Ok(common::Value::Int(1)));
    let after = counters(&mut c);
    let not_accelerated = CAUSES.iter().position(|c| *c == "not_accelerated").unwrap_or(0);
    assert_eq!(after.1[not_accelerated] - before.1[not_accelerated], 2);
    assert_eq!(after.0 - before.0, 1, "the limiter's trySetRate ran natively");
}
