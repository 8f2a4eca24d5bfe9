//! The argument mapping of the rate limiter's bodies, pure: a recognised call's KEYS/ARGV to
//! the native command's arguments ([`plan`]) and back ([`script_call`], for running the Lua).
//!
//! A rewritten call is answered by `super::exec`, never by the command's parser, so its
//! arguments are simply the call's KEYS then its ARGV (the client's strings, reused): the
//! command name only lends the call its flags, key spec (the first key), ACL and
//! `INFO commandstats` entry. `RGcra`'s acquire gets one filler argument, for `GCRA`'s arity.
//!
//! [`plan`] accepts a call when its KEYS are exactly the limiter's as Redisson derives them
//! from the name (`name`, `{name}:value`, `{name}:value:<id>`, `{name}:permits`,
//! `{name}:permits:<id>`, one client id), and the numbers the body computes with from ARGV
//! are ones the module reads as the Lua does: a `tryAcquire` of 0 to 2^32-1 permits (the
//! member's 4 bytes; Lua truncates past them) with at most 255 random bytes (the member's
//! length byte), times within ±2^52 ms (exact in a double, with the interval added).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use super::table::RateKind;
use crate::core::parse_i64;
use crate::core::rate::body_settings::Cond;
use crate::core::rate::window::MAX_PERMITS;
use crate::core::sync::names::{limiter_permits, limiter_value};
use crate::redisson::native::{Native, A};

/// The largest `now` (either sign) a body is answered for: with an interval of up to 10^14
/// added, still an exact double.
pub const MAX_NOW: i64 = 1 << 52;

/// The largest expiry time (either sign) of the expiry helpers: no `now + ms` can overflow.
pub const MAX_EXPIRE: i64 = 1 << 46;

/// The module registered its own `GCRA` (the server has none): `RGcra`'s bodies, which call
/// `GCRA`, may be answered by it. Set at load (`crate::server`).
static GCRA_IS_OURS: AtomicBool = AtomicBool::new(false);

pub fn set_gcra_is_ours(ours: bool) {
    GCRA_IS_OURS.store(ours, Relaxed);
}

/// Whether `kind` can run natively on this server: `RGcra`'s bodies only where the `GCRA`
/// they call is the module's (a server with its own answers them through its Lua).
pub fn runs_here(kind: RateKind) -> bool {
    !kind.gcra() || GCRA_IS_OURS.load(Relaxed)
}

/// The native command of a rate-limiter body.
pub fn native(k: RateKind) -> Native {
    use RateKind::*;
    match k {
        Acquire(_) => Native::RateAcquire,
        Available => Native::RateAvailable,
        Release => Native::RateRelease,
        TrySet(_) => Native::RateTrySet,
        SetRate(_) | SetOrUpdate => Native::RateSet,
        Expire | ExpireAt | ClearExpire => Native::RateExpire,
        GcraTrySet | GcraSet | GcraAcquire => Native::Gcra,
    }
}

/// The client id of KEYS `name, {name}:value, {name}:value:<id>, {name}:permits,
/// {name}:permits:<id>`, if they are exactly those.
pub fn client_of<'a>(keys: &[&'a [u8]]) -> Option<&'a [u8]> {
    let [name, value, client_value, permits, client_permits] = *keys else { return None };
    let (v, p) = (limiter_value(name, None), limiter_permits(name, None));
    let id = client_value.strip_prefix(v.as_slice())?.strip_prefix(b":")?;
    (value == v && permits == p && client_permits == limiter_permits(name, Some(id))).then_some(id)
}

fn within(b: &[u8], lo: i64, hi: i64) -> bool {
    parse_i64(b).is_some_and(|v| (lo..=hi).contains(&v))
}

/// The native arguments of a call of `kind`, or `None` to leave it to Lua.
pub fn plan(kind: RateKind, keys: &[&[u8]], argv: &[&[u8]]) -> Option<Vec<A>> {
    use RateKind::*;
    if keys.len() != kind.keys() || argv.len() != kind.argv() {
        return None;
    }
    let keys_ok = match kind {
        TrySet(_) | GcraTrySet | GcraSet | GcraAcquire => true,
        SetRate(crate::core::rate::body_settings::SetRate::Old) => {
            keys[1] == limiter_value(keys[0], None) && keys[2] == limiter_permits(keys[0], None)
        }
        _ => client_of(keys).is_some(),
    };
    let now = |b: &[u8]| within(b, -MAX_NOW, MAX_NOW);
    let argv_ok = match kind {
        Acquire(_) => within(argv[0], 0, MAX_PERMITS) && now(argv[1]) && argv[2].len() <= 255,
        Available => now(argv[0]),
        Expire | ExpireAt => within(argv[0], -MAX_EXPIRE, MAX_EXPIRE) && Cond::parse(argv[1]).is_some(),
        // The rest parse what they use when they use it (`crate::core::rate::body_settings`).
        _ => true,
    };
    if !(keys_ok && argv_ok) {
        return None;
    }
    let mut args: Vec<A> = (0..keys.len()).map(A::Key).chain((0..argv.len()).map(A::Argv)).collect();
    if kind == GcraAcquire {
        // `GCRA`'s arity is -5; the filler is never read.
        args.push(A::Lit(b"1"));
    }
    Some(args)
}

type Call = (Vec<Vec<u8>>, Vec<Vec<u8>>);

/// The KEYS and ARGV Redisson sent, from the native arguments (after the command name) of a
/// call [`plan`] made.
pub fn script_call(kind: RateKind, native: &[&[u8]]) -> Option<Call> {
    let (nk, na) = (kind.keys(), kind.argv());
    let all = native.get(..nk + na)?;
    let (keys, argv) = all.split_at(nk);
    Some((keys.iter().map(|k| k.to_vec()).collect(), argv.iter().map(|a| a.to_vec()).collect()))
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
