//! Command metadata of the rate limiter (`RATELIMITER.*`): data only, applied with the locks'
//! rows (`super::COMMANDS`).
//!
//! Each command declares `name`, the limiter's hash, as its key (first = last = 1). The value
//! and grant keys (`{name}:value[:id]`, `{name}:permits[:id]`) are no arguments, so no key
//! spec can name them; they lie in `name`'s slot, and the commands check them against the
//! caller's ACL themselves (`crate::core::rate::limiter`).

use super::{arg, BLOCK};
use crate::ffi::metadata::{Arg, ArgKind, Command, KeyAccess};

const NAME: Arg = arg("name", ArgKind::Key);
const PERMITS: Arg = arg("permits", ArgKind::Integer);

const fn token(name: &'static str, word: &'static str, kind: ArgKind) -> Arg {
    Arg { name, kind, token: Some(word), optional: true, multiple: false, subargs: &[] }
}

const CLIENT: Arg = token("id", "CLIENT", ArgKind::String);
const NOW: Arg = token("ms", "NOW", ArgKind::Integer);
const KEEPALIVE: Arg = token("ms", "KEEPALIVE", ArgKind::Integer);
const KEEPSTATE: Arg = token("keepstate", "KEEPSTATE", ArgKind::PureToken);
const XX: Arg = token("xx", "XX", ArgKind::PureToken);
const MODE: Arg = Arg {
    name: "type",
    kind: ArgKind::OneOf,
    token: None,
    optional: false,
    multiple: false,
    subargs: &[
        Arg {
            name: "overall",
            kind: ArgKind::PureToken,
            token: Some("OVERALL"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
        Arg {
            name: "per_client",
            kind: ArgKind::PureToken,
            token: Some("PER_CLIENT"),
            optional: false,
            multiple: false,
            subargs: &[],
        },
    ],
};
const RATE: Arg = arg("rate", ArgKind::Integer);
const INTERVAL: Arg = arg("interval_ms", ArgKind::Integer);

/// The window's cost: the grants that leave it (removed) and those a release takes off.
const WINDOW: &str =
    "O(log(N) + M) where N is the number of grants in the window and M the grants removed or changed; \
                      O(N) on a window changed by someone else since the module last summed it";

#[rustfmt::skip]
pub static COMMANDS: &[Command] = &[
    Command { name: "RATELIMITER.TRYSETRATE", summary: "Sets a rate limiter's rate (Redisson RRateLimiter) if it has none", complexity: "O(1)", arity: -5, key: KeyAccess::ReadUpdate, acl: "write fast", args: &[NAME, MODE, RATE, INTERVAL, KEEPALIVE] },
    Command { name: "RATELIMITER.SETRATE", summary: "Sets a rate limiter's rate, resetting or keeping its state", complexity: WINDOW, arity: -5, key: KeyAccess::ReadUpdate, acl: "write slow", args: &[NAME, MODE, RATE, INTERVAL, KEEPALIVE, KEEPSTATE, XX, CLIENT, NOW] },
    Command { name: "RATELIMITER.ACQUIRE", summary: "Takes permits of a rate limiter, or tells how long to wait; optionally waits in FIFO order", complexity: WINDOW, arity: -3, key: KeyAccess::ReadUpdate, acl: "write slow blocking", args: &[NAME, PERMITS, CLIENT, NOW, BLOCK] },
    Command { name: "RATELIMITER.AVAILABLE", summary: "Returns the permits a rate limiter has available now", complexity: WINDOW, arity: -2, key: KeyAccess::ReadUpdate, acl: "write slow", args: &[NAME, CLIENT, NOW] },
    Command { name: "RATELIMITER.RELEASE", summary: "Gives permits back to a rate limiter and serves its waiters", complexity: WINDOW, arity: -3, key: KeyAccess::ReadUpdate, acl: "write slow", args: &[NAME, PERMITS, CLIENT, NOW] },
];
