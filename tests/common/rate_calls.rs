//! The calls `tests/redisson/redisson_ratelimiter_states.rs` sends each of Redisson's rate-limiter
//! bodies on a limiter state (`super::rate_states`): KEYS and ARGV as `RedissonRateLimiter`
//! and `RedissonExpirable` send them (from Redisson's sources; the SHA1s from
//! `super::ratelimiter`), and which of them are ordinary use.

use super::rate_states::{b, call_random, keys, made_by_redisson, Hash, State, Window, INTERVAL, LONG_MS, NAME, NOW};
use super::ratelimiter::{self as rl, suffix};

/// What a body does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Acquire(usize),
    Available,
    Release,
    TrySet(usize),
    SetRate(usize),
    SetOrUpdate,
    Expire,
    ExpireAt,
    ClearExpire,
    GcraTrySet,
    GcraSet,
    GcraAcquire,
}

pub fn role(sha: &str) -> Role {
    let at = |list: &[&str]| list.iter().position(|s| *s == sha);
    if let Some(i) = at(&rl::ACQUIRE) {
        return Role::Acquire(i);
    }
    if let Some(i) = at(&rl::TRY_SET_RATE) {
        return Role::TrySet(i);
    }
    if let Some(i) = at(&rl::SET_RATE) {
        return Role::SetRate(i);
    }
    match sha {
        rl::AVAILABLE => Role::Available,
        rl::RELEASE => Role::Release,
        rl::SET_OR_UPDATE => Role::SetOrUpdate,
        rl::EXPIRE => Role::Expire,
        rl::EXPIRE_AT => Role::ExpireAt,
        rl::CLEAR_EXPIRE => Role::ClearExpire,
        rl::GCRA_TRY_SET => Role::GcraTrySet,
        rl::GCRA_SET => Role::GcraSet,
        rl::GCRA_ACQUIRE => Role::GcraAcquire,
        other => panic!("no role for body {other}"),
    }
}

/// One call of a body.
pub struct Call {
    pub label: String,
    pub keys: Vec<String>,
    pub argv: Vec<Vec<u8>>,
    /// A call Redisson's own methods make (permits within the rate).
    pub valid: bool,
}

impl Call {
    pub fn evalsha(&self, sha: &str) -> Vec<Vec<u8>> {
        rl::evalsha(sha, &self.keys, &self.argv)
    }
}

fn call(label: impl ToString, keys: Vec<String>, argv: Vec<Vec<u8>>, valid: bool) -> Call {
    Call { label: label.to_string(), keys, argv, valid }
}

/// Whether the body is run on the state at all: the settings and expiry bodies do not read
/// the window, so they are run on a few.
pub fn runs_on(r: Role, s: State) -> bool {
    match r {
        Role::TrySet(_) | Role::SetRate(_) | Role::Expire | Role::ExpireAt | Role::ClearExpire => matches!(
            s.window,
            Window::New | Window::Fresh | Window::Ttls | Window::GrantsNoValue | Window::ValueWrongType
        ),
        Role::GcraTrySet | Role::GcraSet | Role::GcraAcquire => false,
        _ => true,
    }
}

/// The calls a body is sent on a state. `server_now` is the server's clock (for
/// `expireAt`'s absolute time).
pub fn calls(r: Role, s: State, server_now: i64) -> Vec<Call> {
    let k = keys;
    let rate = s.rate();
    let ty = if s.hash == Hash::PerClient { "1" } else { "0" };
    let other = if ty == "1" { "0" } else { "1" };
    match r {
        Role::Acquire(_) => {
            let mut v = vec![
                call("1", k(), vec![b(1), b(NOW), call_random(1, false)], true),
                call("4", k(), vec![b(4), b(NOW), call_random(2, false)], true),
            ];
            if matches!(s.window, Window::New | Window::Fresh | Window::Full | Window::ZeroGrants) {
                v.push(call("0", k(), vec![b(0), b(NOW), call_random(3, false)], true));
                v.push(call("rate", k(), vec![b(rate), b(NOW), call_random(4, false)], true));
                v.push(call("1, 8 random bytes", k(), vec![b(1), b(NOW), call_random(5, true)], true));
                v.push(call("rate + 1", k(), vec![b(rate + 1), b(NOW), call_random(6, false)], false));
                v.push(call("2^32", k(), vec![b(1_u64 << 32), b(NOW), call_random(7, false)], false));
                v.push(call("1, later", k(), vec![b(1), b(NOW + 2500), call_random(8, false)], true));
            }
            v
        }
        Role::Available => {
            vec![call("now", k(), vec![b(NOW)], true), call("later", k(), vec![b(NOW + 2500)], true)]
        }
        Role::Release => vec![call("1", k(), vec![b(1)], true), call("5", k(), vec![b(5)], true)],
        Role::TrySet(i) => {
            let mut v = vec![];
            for t in [ty, other] {
                let mut argv = vec![b(rate), b(INTERVAL), b(t)];
                if i > 0 {
                    argv.push(b(if t == ty { LONG_MS } else { 0 }));
                }
                v.push(call(format!("type {t}"), vec![NAME.into()], argv, true));
            }
            v
        }
        Role::SetRate(i) => {
            let keys = if i == 0 { vec![NAME.into(), suffix(NAME, "value"), suffix(NAME, "permits")] } else { k() };
            let mut v = vec![];
            for t in [ty, other] {
                let mut argv = vec![b(5), b(2 * INTERVAL), b(t)];
                if i > 1 {
                    argv.push(b(if t == ty { LONG_MS } else { 0 }));
                }
                v.push(call(format!("type {t}"), keys.clone(), argv, true));
            }
            v
        }
        Role::SetOrUpdate => {
            let one = |label: &str, t: &str, ka: i64, keep: &str, req: &str| {
                call(label, k(), vec![b(5), b(2 * INTERVAL), b(t), b(ka), b(NOW), b(keep), b(req)], true)
            };
            vec![
                one("keep state", ty, 0, "1", "0"),
                one("keep state, keep-alive, must exist", ty, LONG_MS, "1", "1"),
                one("reset", ty, 0, "0", "0"),
                one("other type", other, 0, "1", "0"),
            ]
        }
        Role::Expire => [(120_000, ""), (120_000, "NX"), (120_000, "gt"), (60_000, "LT"), (-1, "")]
            .iter()
            // A time already past deletes: Redis and Valkey fire different events for it.
            .map(|(ms, o)| call(format!("{ms} {o:?}"), k(), vec![b(ms), b(o)], *ms > 0))
            .collect(),
        Role::ExpireAt => [(server_now + 120_000, ""), (1000, "XX")]
            .iter()
            .map(|(at, o)| call(format!("{at} {o:?}"), k(), vec![b(at), b(o)], *at > server_now))
            .collect(),
        Role::ClearExpire => vec![call("", k(), vec![], true)],
        Role::GcraTrySet | Role::GcraSet | Role::GcraAcquire => vec![],
    }
}

/// Whether a call on a state is ordinary use: Redisson's own call on a state Redisson's own
/// calls make. Every such call must run natively.
pub fn ordinary(s: State, c: &Call) -> bool {
    made_by_redisson(s) && c.valid
}
