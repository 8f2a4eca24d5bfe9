//! A Redisson client (its own Lua bodies, HEAD's) and a native client sharing one rate limiter
//! on one server (issue 30); Redisson's known wrong answers (7329, 7342) shown on its bodies
//! alone and what the module's calls make of them (issue 36: the window decides, a Redisson
//! release is not taken for a credit); and random runs that check the invariants: granted
//! permits in any window never above the rate, 0 <= value <= rate, no credit of the module's
//! own release lost, the member count bounded.

use crate::common;

use common::ratelimiter::{self as rl, evalsha, grants, grants_per_ms, run};
use common::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const T0: i64 = 2_000_000_000;
const ID: &str = "java-client";

struct Lua<'a> {
    c: &'a mut redis::Connection,
}

impl Lua<'_> {
    fn acquire(&mut self, n: u32, t: i64, random: &[u8; 16]) -> Result<Value, String> {
        let a =
            evalsha(rl::ACQUIRE[3], &rl::keys("r", ID), &[n.to_string().into(), t.to_string().into(), random.to_vec()]);
        run(self.c, &a)
    }

    fn release(&mut self, n: u32) {
        let a = evalsha(rl::RELEASE, &rl::keys("r", ID), &[n.to_string().into()]);
        assert_eq!(run(self.c, &a), Ok(Value::Nil));
    }

    fn available(&mut self, t: i64) -> i64 {
        match run(self.c, &evalsha(rl::AVAILABLE, &rl::keys("r", ID), &[t.to_string().into()])) {
            Ok(Value::Int(n)) => n,
            Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).parse().expect("a count"),
            other => panic!("{other:?}"),
        }
    }
}

fn setup(s: &Server, rate: u32, interval: i64) -> redis::Connection {
    let mut c = s.conn();
    rl::load_on(&mut c, &rl::load());
    let a = evalsha(
        rl::TRY_SET_RATE[2],
        &["r".into()],
        &[rate.to_string().into(), interval.to_string().into(), "0".into(), "0".into()],
    );
    assert_eq!(run(&mut c, &a), Ok(Value::Int(1)));
    c
}

fn native(c: &mut redis::Connection, cmd: &str, n: Option<u32>, t: i64) -> Value {
    let t = t.to_string();
    let n = n.map(|n| n.to_string());
    let mut a = vec![cmd, "r"];
    a.extend(n.as_deref());
    a.extend(["NOW", &t]);
    ok(c, &a)
}

fn value(c: &mut redis::Connection) -> i64 {
    let v: Option<String> = redis::cmd("GET").arg("{r}:value").query(c).expect("GET");
    v.and_then(|v| v.parse().ok()).unwrap_or(-1)
}

#[test]
fn a_redisson_client_and_a_native_client_share_one_limiter() {
    let s = Server::start();
    let mut c = setup(&s, 10, 1_000);
    let (r1, r2) = ([1u8; 16], [2u8; 16]);
    assert_eq!(Lua { c: &mut c }.acquire(3, T0, &r1), Ok(Value::Nil));
    assert_eq!(Lua { c: &mut c }.acquire(2, T0 + 5, &r2), Ok(Value::Nil));
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(4), T0 + 10), Value::Nil);
    // The module's wait counts from Redisson's oldest grant, and Redisson's from the window the
    // module left.
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(2), T0 + 20), Value::Int(3 + 1_000 - 20));
    assert_eq!(Lua { c: &mut c }.acquire(2, T0 + 30, &[3; 16]), Ok(Value::Int(3 + 1_000 - 30)));
    assert_eq!(Lua { c: &mut c }.available(T0 + 40), 1);
    assert_eq!(native(&mut c, "RATELIMITER.AVAILABLE", None, T0 + 40), Value::Int(1));
    // Redisson's members are its own bytes, untouched by the module's calls.
    let members: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg("{r}:permits").arg(0).arg(1).query(&mut c).expect("ZRANGE");
    assert_eq!(members, [rl::member(&r1, 3), rl::member(&r2, 2)]);
    // At T0 + 1,000 the 3 of T0 come back, for either client.
    assert_eq!(Lua { c: &mut c }.acquire(4, T0 + 1_000, &[4; 16]), Ok(Value::Nil));
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(1), T0 + 1_000), Value::Int(3 + 1_000 - 995));
    // A module grant in a millisecond Redisson already granted in is a member of its own, as
    // Redisson's are (a millisecond's grants fold into one member only once there are 16).
    assert_eq!(Lua { c: &mut c }.acquire(1, T0 + 2_000, &[5; 16]), Ok(Value::Nil));
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(2), T0 + 2_000), Value::Nil);
    assert_eq!(grants_per_ms(&mut c, "{r}:permits"), [(T0 + 2_000, 3)]);
    assert_eq!(native(&mut c, "RATELIMITER.AVAILABLE", None, T0 + 2_001), Value::Int(7));
    let m: Vec<Vec<u8>> = redis::cmd("ZRANGE").arg("{r}:permits").arg(0).arg(-1).query(&mut c).expect("ZRANGE");
    assert!(m.contains(&rl::member(&[5; 16], 1)) && m.len() == 2, "{m:?}");
    assert_eq!(value(&mut c), 7);
}

/// Redisson 7342: `tryAcquire(1)` and `release(1)` every 100 ms at 10 per second. Alone,
/// Redisson's bodies drop the released permits at 1,001 ms (the count falls to 2). A module
/// call counts the window too (issue 36: a value above what the window leaves cannot be told
/// from one left by a higher rate), so Redisson's own releases are not credited; the module's
/// `RATELIMITER.RELEASE` is, and nothing of it is lost.
#[test]
fn redissons_release_is_not_the_windows_and_the_modules_release_is() {
    let lua = Server::start_plain();
    let mut lc = setup(&lua, 10, 1_000);
    for i in 0..9 {
        assert_eq!(Lua { c: &mut lc }.acquire(1, T0 + 100 * i + 1, &[i as u8; 16]), Ok(Value::Nil));
        Lua { c: &mut lc }.release(1);
    }
    assert_eq!(Lua { c: &mut lc }.acquire(1, T0 + 1_001, &[9; 16]), Ok(Value::Nil));
    assert_eq!(value(&mut lc), 1, "Redisson 7342: 10 - 8 live grants - 1");
    let s = Server::start();
    let mut c = setup(&s, 10, 1_000);
    for i in 0..9 {
        assert_eq!(Lua { c: &mut c }.acquire(1, T0 + 100 * i + 1, &[i as u8; 16]), Ok(Value::Nil));
        Lua { c: &mut c }.release(1);
    }
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(1), T0 + 1_001), Value::Nil);
    assert_eq!(value(&mut c), 1, "the window's count: 8 live grants and this one");
    assert_eq!(grants(&mut c, "{r}:permits").len(), 9);
    ok(&mut c, &["FLUSHALL"]);
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", "10", "1000"]);
    for i in 0..9 {
        assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(1), T0 + 100 * i + 1), Value::Nil);
        assert_eq!(native(&mut c, "RATELIMITER.RELEASE", Some(1), T0 + 100 * i + 1), Value::Int(10));
    }
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(1), T0 + 1_001), Value::Nil);
    assert_eq!(value(&mut c), 9, "every release of the module's kept");
}

/// Issue 36: what crediting Redisson's release got wrong without any rate change. A release
/// by Redisson's body at 0 ms gives back the grant of 0 ms; a Redisson grant at 200 ms uses the
/// value it raised. The module took the release off the newest grant (the one of 200 ms, made
/// after it), so once the grant of 0 ms left at 1,000 ms it granted the whole rate again while
/// the grant of 200 ms was still live.
#[test]
fn a_redisson_release_never_lets_a_module_grant_pass_the_rate() {
    let s = Server::start();
    let mut c = setup(&s, 4, 1_000);
    assert_eq!(Lua { c: &mut c }.acquire(2, T0, &[1; 16]), Ok(Value::Nil));
    Lua { c: &mut c }.release(2);
    assert_eq!(Lua { c: &mut c }.acquire(2, T0 + 200, &[2; 16]), Ok(Value::Nil));
    assert_eq!(native(&mut c, "RATELIMITER.AVAILABLE", None, T0 + 900), Value::Int(0));
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(2), T0 + 1_000), Value::Nil);
    assert_eq!(native(&mut c, "RATELIMITER.ACQUIRE", Some(1), T0 + 1_000), Value::Int(3 + 1_000 - 800));
    assert_eq!(live(&mut c, T0 + 1_000, 1_000), 4);
}

/// Redisson 7329: after a release, availablePermits() counts the released grant again when it
/// expires, above the rate.
#[test]
fn redissons_available_passes_the_rate_alone_and_never_with_the_module() {
    let lua = Server::start_plain();
    let mut lc = setup(&lua, 10, 1_000);
    assert_eq!(Lua { c: &mut lc }.acquire(1, T0, &[1; 16]), Ok(Value::Nil));
    Lua { c: &mut lc }.release(1);
    assert_eq!(Lua { c: &mut lc }.available(T0 + 2_000), 11, "Redisson 7329");
    let s = Server::start();
    let mut c = setup(&s, 10, 1_000);
    assert_eq!(Lua { c: &mut c }.acquire(1, T0, &[1; 16]), Ok(Value::Nil));
    Lua { c: &mut c }.release(1);
    assert_eq!(native(&mut c, "RATELIMITER.AVAILABLE", None, T0 + 2_000), Value::Int(10));
    assert_eq!(native(&mut c, "RATELIMITER.RELEASE", Some(1), T0 + 2_000), Value::Int(10));
}

/// Permits of the grants live at `t` in a window of `interval` ms.
fn live(c: &mut redis::Connection, t: i64, interval: i64) -> i64 {
    grants(c, "{r}:permits").into_iter().filter(|g| g.0 > t - interval).map(|g| i64::from(g.1)).sum()
}

/// Module calls only, on a real server, against a model of the window: the replies, the
/// value and the grants per millisecond exactly, rates lowered and raised with KEEPSTATE.
#[test]
fn random_native_runs_follow_the_model_and_keep_the_invariants() {
    let s = Server::start();
    let mut c = s.conn();
    let interval = 300;
    let mut rate = 12;
    ok(&mut c, &["RATELIMITER.TRYSETRATE", "r", "OVERALL", &rate.to_string(), &interval.to_string()]);
    let mut rng = SmallRng::seed_from_u64(common::diff::env("LOCKMOD_RL_RANDOM_SEED", 7));
    let mut model: Vec<(i64, i64)> = Vec::new();
    let mut t = T0;
    let steps = common::diff::env("LOCKMOD_RL_RANDOM_STEPS", 1_500);
    for step in 0..steps {
        t += [0, 0, 1, 7, 40, 150][rng.gen_range(0..6)];
        model.retain(|g| g.0 > t - interval);
        let live_before: i64 = model.iter().map(|g| g.1).sum();
        let n = rng.gen_range(1..=5i64);
        match rng.gen_range(0..10) {
            0..=4 if n > rate => {
                let a = ["RATELIMITER.ACQUIRE", "r", &n.to_string(), "NOW", &t.to_string()];
                let want = "ERR Requested permits amount cannot exceed defined rate";
                assert_eq!(call(&mut c, &a), Err(want.into()), "step {step}");
                // An error writes nothing: the expired grants stay until the next call.
                continue;
            }
            0..=4 => {
                let got = native(&mut c, "RATELIMITER.ACQUIRE", Some(n as u32), t);
                if live_before + n <= rate {
                    assert_eq!(got, Value::Nil, "step {step}");
                    match model.iter_mut().find(|g| g.0 == t) {
                        Some(g) => g.1 += n,
                        None => model.push((t, n)),
                    }
                } else {
                    let oldest = model.iter().map(|g| g.0).min().expect("a live grant");
                    assert_eq!(got, Value::Int(3 + interval - (t - oldest)), "step {step}");
                }
            }
            5..=6 => {
                model.sort();
                let mut left = n;
                while left > 0 {
                    let Some(last) = model.last_mut() else { break };
                    let k = left.min(last.1);
                    last.1 -= k;
                    left -= k;
                    if last.1 == 0 {
                        model.pop();
                    }
                }
                let live: i64 = model.iter().map(|g| g.1).sum();
                // No release credit lost: exactly what the window then leaves.
                let want = (rate - live).max(0);
                assert_eq!(native(&mut c, "RATELIMITER.RELEASE", Some(n as u32), t), Value::Int(want), "step {step}");
            }
            7 => {
                rate = rng.gen_range(3..=15);
                let a = [
                    "RATELIMITER.SETRATE",
                    "r",
                    "OVERALL",
                    &rate.to_string(),
                    &interval.to_string(),
                    "KEEPSTATE",
                    "NOW",
                    &t.to_string(),
                ];
                assert_eq!(ok(&mut c, &a), Value::Int(1));
            }
            _ => {
                let want = (rate - live_before).max(0);
                assert_eq!(native(&mut c, "RATELIMITER.AVAILABLE", None, t), Value::Int(want), "step {step}");
            }
        }
        model.sort();
        let live: i64 = model.iter().map(|g| g.1).sum();
        let z: Vec<(i64, i64)> =
            grants_per_ms(&mut c, "{r}:permits").into_iter().map(|(a, b)| (a, i64::from(b))).collect();
        assert_eq!(z, model, "step {step}");
        let v = value(&mut c);
        assert!((0..=rate).contains(&v), "step {step}: value {v} of {rate}");
        assert_eq!(v, (rate - live).max(0), "step {step}");
        // About one member per millisecond: the newest millisecond's grants are folded by the
        // next millisecond's call.
        let members = grants(&mut c, "{r}:permits").len() as i64;
        assert!(members <= interval + rate, "step {step}: {members} members");
    }
}

/// Redisson's bodies and module calls mixed at random on one limiter: after every module
/// call the window and the value agree (the value is the rate less the permits in the zset,
/// never below 0 or above the rate), and no module grant takes the window past the rate.
#[test]
fn random_mixed_runs_leave_a_consistent_window_after_every_module_call() {
    let s = Server::start();
    let (rate, interval) = (8, 500);
    let mut c = setup(&s, rate as u32, interval);
    let mut rng = SmallRng::seed_from_u64(common::diff::env("LOCKMOD_RL_RANDOM_SEED", 11));
    let mut t = T0;
    let steps = common::diff::env("LOCKMOD_RL_RANDOM_STEPS", 1_500);
    let (mut module_grants, mut lua_releases) = (0, 0);
    for step in 0..steps {
        t += [0, 1, 9, 60, 200][rng.gen_range(0..5)];
        let n = rng.gen_range(1..=3u32);
        let before = live(&mut c, t, interval);
        let got = match rng.gen_range(0..6) {
            0 => {
                let _ = Lua { c: &mut c }.acquire(n, t, &rng.gen());
                continue;
            }
            1 => {
                Lua { c: &mut c }.release(n);
                lua_releases += 1;
                continue;
            }
            2 => {
                let _ = Lua { c: &mut c }.available(t);
                continue;
            }
            3 => native(&mut c, "RATELIMITER.ACQUIRE", Some(n), t),
            4 => native(&mut c, "RATELIMITER.AVAILABLE", None, t),
            _ => native(&mut c, "RATELIMITER.RELEASE", Some(n), t),
        };
        // After a module call nothing expired is left, and the value is what the window leaves.
        let all: i64 = grants(&mut c, "{r}:permits").iter().map(|g| i64::from(g.1)).sum();
        let after = live(&mut c, t, interval);
        assert_eq!(all, after, "step {step}: expired grants left");
        let v = value(&mut c);
        assert_eq!(v, (rate - after).max(0), "step {step}: value {v}, {after} in the window");
        assert!((0..=rate).contains(&v), "step {step}: value {v}");
        if let Value::Int(n) = got {
            assert!((0..=rate + 1_003).contains(&n), "step {step}: {n}");
        }
        if got == Value::Nil {
            module_grants += 1;
            assert!(after <= rate, "step {step}: a module grant took the window to {after}");
            assert!(after <= before + i64::from(n), "step {step}: {before} -> {after}");
        }
    }
    assert!(module_grants > 50 && lua_releases > 50, "{module_grants} grants, {lua_releases} releases");
}
