//! The native rate limiter against Redisson's own bodies (issue 30): for every release group
//! (releases 3.17.0 to HEAD that send the same `RRateLimiter` bodies), random calls go to a
//! plain server as the bodies (`EVALSHA`, KEYS and ARGV as Redisson's sources send them) and to
//! a server with the module as `RATELIMITER.*`, with the same `NOW` on both sides.
//!
//! What is compared after every call:
//! - the replies, exactly (`availablePermits`' bulk reply read as its integer; errors: both
//!   sides fail, and nothing is written);
//! - the hash, exactly; the value keys, exactly;
//! - each grant zset as *score -> sum of the permits of its members*: the module folds the
//!   grants of a busy millisecond into one member and draws its own random bytes, so member
//!   bytes are not compared here (tests/rate/ratelimiter_shared.rs checks a body's members are kept
//!   byte for byte); every native member is checked to be `struct.pack('Bc0I', 16, random, n)`;
//! - every key's `PEXPIRETIME`, within 100 ms (each server sets a TTL on its own clock).
//!
//! And the invariant (issue 36): every grant the native side makes is put in a ledger (the
//! test's own model of the window: a release takes permits off the newest grants, a reset
//! forgets the window), which must never hold more than the rate in force in any window. The
//! runs change the rate (lowered below what a window holds, raised, `KEEPSTATE` or not) and,
//! on a PER_CLIENT limiter, act as one of two clients, so one client's `setRate` leaves the
//! other's value as it was.
//!
//! Where the module deliberately differs from a body (docs/design.md, "The rate limiter"), the
//! difference is applied to the Lua side as an explicit correction, so the states stay
//! comparable byte for byte, and each correction *is* the documented deviation: the
//! `keepAliveTime` field every set writes (3.38+'s), the TTLs an acquire and
//! `availablePermits` leave (3.38+'s acquire), a release's permits taken off the newest grants
//! after the expired ones are removed, `setRate` of 3.17-3.22 dropping the grants too (and a
//! per-client limiter's own keys), and the value the window explains written before a body
//! reads it (`rate_diff::EXPLAINED`: the module never trusts a value its window does not
//! explain, where Redisson's bodies do). A classic `setRate` does not change the type (its
//! bodies leave the other type's keys; 4.4's `setOrUpdate` does change it, and is compared
//! exactly).

use crate::common;

use common::diff::env;
use common::rate_diff::{groups, keyspace_difference, take_newest, Group, Ledger, EXPLAINED, TTL_BLOCK};
use common::ratelimiter::{self as rl, evalsha, run};
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const NAME: &str = "lim";
const CLIENTS: [&str; 2] = ["5d5d2a52-7a8e-4b4e-9d9d-0a1b2c3d4e5f", "9e3c1b70-2d4f-4a6b-8c1e-7f0a2b3c4d5e"];
const TOL_MS: i64 = 100;
/// TTLs and keep-alives set in the runs: far beyond a run, so nothing expires in one.
const LONG: i64 = 600_000;

struct Run {
    /// The servers, kept alive (killed on drop) for the run's connections.
    _servers: (Server, Server),
    lc: redis::Connection,
    nc: redis::Connection,
    rng: SmallRng,
    now: i64,
    per_client: bool,
    /// The client acting now (PER_CLIENT: one of two; every call names one, as Redisson's do).
    client: &'static str,
    rate: i64,
    interval: i64,
    steps: usize,
    ledger: Ledger,
}

fn b(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

fn s(a: &[&str]) -> Vec<String> {
    a.iter().map(|x| x.to_string()).collect()
}

impl Run {
    fn keys(&self) -> Vec<String> {
        rl::keys(NAME, self.client)
    }

    /// The value and grant keys of the state in use.
    fn state(&self) -> (String, String) {
        let k = self.keys();
        if self.per_client {
            (k[2].clone(), k[4].clone())
        } else {
            (k[1].clone(), k[3].clone())
        }
    }

    /// A module command, with `CLIENT` as Redisson always sends its client's keys.
    fn native(&mut self, args: &[String]) -> Result<Value, String> {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        if !a[0].ends_with("TRYSETRATE") {
            a.extend(["CLIENT", self.client]);
        }
        call(&mut self.nc, &a)
    }

    /// Runs the test's own Lua on the Lua side's state in use (KEYS name, value, permits).
    fn lua_own(&mut self, script: &str, argv: &[String]) -> Value {
        let (v, p) = self.state();
        let mut args = s(&["EVAL", script, "3", NAME, &v, &p]);
        args.extend(argv.iter().cloned());
        ok(&mut self.lc, &args.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Permits live in a window of `interval` ms at `now`, on the Lua side.
    fn live(&mut self, interval: i64) -> i64 {
        let (_, p) = self.state();
        let t = self.now;
        rl::grants(&mut self.lc, &p).into_iter().filter(|g| g.0 > t - interval).map(|g| i64::from(g.1)).sum()
    }

    /// Takes `n` permits off the newest grants of the Lua side's zset (the module's release).
    fn lua_fold(&mut self, n: i64) {
        let (_, p) = self.state();
        take_newest(&mut self.lc, &p, n);
    }

    fn eval(&mut self, sha: &str, argv: &[Vec<u8>]) -> Result<Value, String> {
        let keys = if sha == rl::SET_RATE[0] {
            let k = self.keys();
            vec![k[0].clone(), k[1].clone(), k[3].clone()]
        } else if rl::TRY_SET_RATE.contains(&sha) {
            vec![NAME.to_string()]
        } else {
            self.keys()
        };
        run(&mut self.lc, &evalsha(sha, &keys, argv))
    }

    /// The keyspaces compared as the header says; the first difference, if any.
    fn difference(&mut self) -> Option<String> {
        keyspace_difference(&mut self.lc, &mut self.nc, TOL_MS)
    }

    fn check(&mut self, what: &str, lua: Result<Value, String>, nat: Result<Value, String>) {
        self.steps += 1;
        let as_int = |v: &Value| match v {
            Value::BulkString(b) => String::from_utf8_lossy(b).parse::<i64>().ok().map(Value::Int),
            other => Some(other.clone()),
        };
        let same = match (&lua, &nat) {
            (Ok(a), Ok(b)) => as_int(a) == as_int(b),
            (Err(_), Err(_)) => true,
            _ => false,
        };
        let diff = if same { self.difference() } else { Some("replies differ".into()) };
        if let Some(d) = diff {
            panic!("step {} {what} as {}: lua {lua:?} native {nat:?}: {d}", self.steps, self.client);
        }
    }

    /// The correction before a body reads the value: [`EXPLAINED`] on the Lua side, where the
    /// native call it is compared with went on (an error writes nothing on either side). The
    /// native call removed what left its window: so does the ledger.
    fn explained(&mut self, native: &Result<Value, String>) {
        if native.is_ok() {
            let now = self.now.to_string();
            self.lua_own(EXPLAINED, &[now]);
            let w = self.window();
            self.ledger.touch(&w, self.now, self.interval);
        }
    }

    /// The ledger's window of the state in use.
    fn window(&self) -> String {
        self.state().0
    }
}

/// One random run of `steps` calls of group `g`'s bodies.
fn run_group(scripts: &common::redisson::Scripts, g: &Group, seed: u64, steps: usize) -> usize {
    let lua = Server::start_plain();
    let nat = Server::start();
    let (mut lc, mut nc) = (lua.conn(), nat.conn());
    rl::load_on(&mut lc, scripts);
    // The expiry helpers run as Lua on both sides.
    rl::load_on(&mut nc, scripts);
    let mut rng = SmallRng::seed_from_u64(seed);
    let per_client = rng.gen_bool(0.4);
    let mut r = Run {
        _servers: (lua, nat),
        lc,
        nc,
        rng,
        now: 1_000_000_000,
        per_client,
        client: CLIENTS[0],
        rate: 1,
        interval: 100,
        steps: 0,
        ledger: Ledger::default(),
    };
    let mode = |pc: bool| if pc { "PER_CLIENT" } else { "OVERALL" };
    // Uninitialized: both refuse.
    let argv = [b(1), b(r.now), vec![7u8; 16]];
    let (l, n) =
        (r.eval(&g.acquire, &argv), r.native(&s(&["RATELIMITER.ACQUIRE", NAME, "1", "NOW", &r.now.to_string()])));
    assert!(l.as_ref().is_err_and(|e| e.contains("RateLimiter is not initialized")), "{l:?}");
    r.check("uninitialized", l, n);
    let mut initialized = false;
    for _ in 0..steps {
        r.now += [0, 0, 0, 1, 3, 20, 70, 150, 400][r.rng.gen_range(0..9)];
        r.client = if r.per_client && r.rng.gen_bool(0.3) { CLIENTS[1] } else { CLIENTS[0] };
        let now = r.now.to_string();
        let pick = r.rng.gen_range(0..100);
        if !initialized || pick < 4 {
            // trySetRate (a fresh limiter, or a refused one on an existing limiter).
            let rate = [1, 3, 10][r.rng.gen_range(0..3)];
            let interval = [100, 1_000][r.rng.gen_range(0..2)];
            let ka = if r.rng.gen_bool(0.5) { 0 } else { LONG };
            let t = if r.per_client { 1 } else { 0 };
            let (lua, extra) = match g.try_set.as_str() {
                s if s == rl::TRY_SET_RATE[0] => (vec![b(rate), b(interval), b(t)], None),
                s if s == rl::TRY_SET_RATE[1] => (vec![b(rate), b(interval), b(t), b(ka)], Some(ka)),
                _ => (vec![b(rate), b(interval), b(t), b(ka)], None),
            };
            let l = r.eval(&g.try_set.clone(), &lua);
            let mut args =
                s(&["RATELIMITER.TRYSETRATE", NAME, mode(r.per_client), &rate.to_string(), &interval.to_string()]);
            if ka > 0 && extra.is_none() && g.try_set == rl::TRY_SET_RATE[2] {
                args.extend(s(&["KEEPALIVE", &ka.to_string()]));
            }
            let n = r.native(&args);
            if g.try_set != rl::TRY_SET_RATE[2] {
                // Deviation: the module writes keepAliveTime as 3.38+ does.
                ok(&mut r.lc, &["HSETNX", NAME, "keepAliveTime", "0"]);
            }
            if let (Some(ttl), Ok(Value::Int(1))) = (extra, &n) {
                // 3.37's trySetRate(ttl): the module's TRYSETRATE and the TTL.
                if ttl > 0 {
                    ok(&mut r.nc, &["PEXPIRE", NAME, &ttl.to_string()]);
                }
            }
            if !initialized {
                (r.rate, r.interval) = (rate, interval);
                initialized = true;
            }
            r.check("trySetRate", l, n);
        } else if pick < 10 {
            let rate = [1, 2, 3, 10][r.rng.gen_range(0..4)];
            let interval = [100, 1_000][r.rng.gen_range(0..2)];
            set_rate(&mut r, g, rate, interval);
        } else if pick < 14 {
            // Redisson's expiry helpers: Lua on both sides (the same TTLs everywhere).
            let which = r.rng.gen_range(0..3);
            let keys = r.keys();
            let (sha, argv) = match which {
                0 => (rl::EXPIRE, vec![b(LONG + r.rng.gen_range(0..LONG)), b("")]),
                1 => (rl::EXPIRE_AT, vec![b(common::diff::now_ms() + LONG), b("")]),
                _ => (rl::CLEAR_EXPIRE, vec![]),
            };
            let a = evalsha(sha, &keys, &argv);
            let (l, n) = (run(&mut r.lc, &a), run(&mut r.nc, &a));
            r.check("expire helper", l, n);
        } else if pick < 30 {
            // availablePermits (the TTLs of an acquire: a deviation, applied to the Lua side).
            let n = r.native(&s(&["RATELIMITER.AVAILABLE", NAME, "NOW", &now]));
            r.explained(&n);
            let l = r.eval(rl::AVAILABLE, &[b(&now)]);
            r.lua_own(TTL_BLOCK, &[]);
            r.check("availablePermits", l, n);
        } else if pick < 42 && g.release.is_some() {
            let k = r.rng.gen_range(1..=r.rate + 1);
            // The module removes what expired and takes the release off the newest grants.
            let n = r.native(&s(&["RATELIMITER.RELEASE", NAME, &k.to_string(), "NOW", &now]));
            r.explained(&n);
            let l0 = r.eval(rl::AVAILABLE, &[b(&now)]);
            assert!(l0.is_ok(), "{l0:?}");
            let live = r.live(r.interval);
            let l = r.eval(rl::RELEASE, &[b(k)]);
            r.lua_fold(k.min(live));
            // The value the module leaves: the rate less what the window then holds (the
            // release body set the TTLs already).
            if n.is_ok() {
                r.lua_own(EXPLAINED, &[now.clone(), "keepttl".into()]);
            }
            let w = r.window();
            r.ledger.release(&w, r.now, k, r.interval);
            let (v, _) = r.state();
            let after = get_int(&mut r.lc, &v);
            assert_eq!(l, Ok(Value::Nil));
            r.check("release", Ok(Value::Int(after.max(0))), n);
        } else {
            let permits = if r.rng.gen_range(0..20) == 0 { r.rate + 1 } else { r.rng.gen_range(1..=r.rate) };
            let random: [u8; 16] = r.rng.gen();
            let n = r.native(&s(&["RATELIMITER.ACQUIRE", NAME, &permits.to_string(), "NOW", &now]));
            r.explained(&n);
            let l = r.eval(&g.acquire.clone(), &[b(permits), b(&now), random.to_vec()]);
            if g.acquire == rl::ACQUIRE[0] {
                // 3.17.0-3.17.2 set no TTLs; the module does.
                r.lua_own(TTL_BLOCK, &[]);
            }
            if n == Ok(Value::Nil) {
                let w = r.window();
                if let Err(e) = r.ledger.grant(&w, r.now, permits, r.rate, r.interval) {
                    panic!("step {}: {e}", r.steps + 1);
                }
            }
            r.check("tryAcquire", l, n);
        }
    }
    r.ledger.grants
}

fn get_int(c: &mut redis::Connection, key: &str) -> i64 {
    let v: Option<String> = redis::cmd("GET").arg(key).query(c).expect("GET");
    v.and_then(|v| v.parse().ok()).unwrap_or(-1)
}

/// `setRate` as the group sends it, and the module's `SETRATE` that answers it.
fn set_rate(r: &mut Run, g: &Group, rate: i64, interval: i64) {
    let now = r.now.to_string();
    let t = i64::from(r.per_client);
    let ka = if r.rng.gen_bool(0.5) { 0 } else { LONG };
    let mode = if r.per_client { "PER_CLIENT" } else { "OVERALL" };
    let mut args = s(&["RATELIMITER.SETRATE", NAME, mode, &rate.to_string(), &interval.to_string()]);
    if let (Some(sha), true) = (g.set_or_update.clone(), r.rng.gen_bool(0.6)) {
        // setRate(RateLimiterArgs) / updateRate: the module's SETRATE, exactly, whatever the
        // rate (below what the window holds too).
        let keep = r.rng.gen_bool(0.6);
        let xx = r.rng.gen_bool(0.2);
        let changes = r.rng.gen_bool(0.1);
        if changes {
            r.per_client = !r.per_client;
            r.client = CLIENTS[0];
            args[2] = if r.per_client { "PER_CLIENT".into() } else { "OVERALL".into() };
        }
        let argv =
            [b(rate), b(interval), b(i64::from(r.per_client)), b(ka), b(&now), b(i64::from(keep)), b(i64::from(xx))];
        let l = r.eval(&sha, &argv);
        if ka > 0 {
            args.extend(s(&["KEEPALIVE", &ka.to_string()]));
        }
        if keep {
            args.push("KEEPSTATE".into());
        }
        if xx {
            args.push("XX".into());
        }
        args.extend(s(&["NOW", &now]));
        let n = r.native(&args);
        if matches!(n, Ok(Value::Int(1))) {
            (r.rate, r.interval) = (rate, interval);
            match (changes, keep) {
                (true, _) => r.ledger.reset_all(),
                (false, false) => r.ledger.reset(&r.window()),
                (false, true) => {
                    let w = r.window();
                    r.ledger.touch(&w, r.now, interval);
                }
            }
        }
        r.check("setOrUpdate", l, n);
        return;
    }
    let classic = g.set_rate.clone();
    let argv = match classic.as_str() {
        x if x == rl::SET_RATE[0] || x == rl::SET_RATE[1] => vec![b(rate), b(interval), b(t)],
        _ => vec![b(rate), b(interval), b(t), b(ka)],
    };
    let l = r.eval(&classic, &argv);
    if classic == rl::SET_RATE[3] && ka > 0 {
        args.extend(s(&["KEEPALIVE", &ka.to_string()]));
    }
    let n = r.native(&args);
    if classic == rl::SET_RATE[2] && ka > 0 {
        // 3.37's setRate(ttl): SETRATE and the TTL.
        ok(&mut r.nc, &["PEXPIRE", NAME, &ka.to_string()]);
    }
    if classic != rl::SET_RATE[3] {
        ok(&mut r.lc, &["HSET", NAME, "keepAliveTime", "0"]);
    }
    if classic == rl::SET_RATE[0] && r.per_client {
        // 3.17-3.22 reset the overall keys whatever the type; the module resets the state in use.
        let (v, p) = r.state();
        ok(&mut r.lc, &["DEL", &v, &p]);
    }
    (r.rate, r.interval) = (rate, interval);
    r.ledger.reset(&r.window());
    // Java's setRate returns nothing; the module's SETRATE replies 1.
    assert_eq!(n, Ok(Value::Int(1)));
    r.check("setRate", l, Ok(Value::Nil));
}

#[test]
fn every_release_groups_bodies_answer_as_the_native_commands_and_no_window_passes_its_rate() {
    let scripts = rl::load();
    let gs = groups(&scripts);
    assert_eq!(gs.len(), 8, "release groups of RRateLimiter's bodies");
    let steps = env("LOCKMOD_RL_DIFF_STEPS", 250) as usize;
    let seed = env("LOCKMOD_RL_DIFF_SEED", 0x5eed);
    let mut granted = 0;
    for (i, g) in gs.iter().enumerate() {
        eprintln!("{}..{}: {} steps", g.releases[0], g.releases[g.releases.len() - 1], steps);
        granted += run_group(&scripts, g, seed + i as u64, steps);
    }
    assert!(granted > 100, "only {granted} native grants were checked against the ledger");
}
