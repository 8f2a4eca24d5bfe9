//! The kinds of limiter state `tests/redisson/redisson_ratelimiter_states.rs` puts each of
//! Redisson's rate-limiter bodies in front of, and the commands that make them (the calls sent
//! there are in `super::rate_calls`).
//!
//! A state is the limiter's hash ([`Hash`]) and the window of the state its type uses
//! ([`Window`]: the value key and the grant zset). The window's clock is [`NOW`], the same in
//! every call's ARGV on both sides; every TTL is far beyond the run.

use super::ratelimiter::{self as rl, member};

pub const NAME: &str = "lim";
pub const CLIENT: &str = "2f6c1a9e-4b7d-4c3e-9a8b-5d4e3f2a1b0c";
/// ARGV's clock: fixed, so both sides judge every grant alike.
pub const NOW: i64 = 1_700_000_000_000;
pub const INTERVAL: i64 = 1000;
pub const LONG_MS: i64 = 600_000;

/// The limiter's hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    Absent,
    /// As 3.38+'s `trySetRate` writes it: `keepAliveTime` 0.
    Overall,
    PerClient,
    /// `keepAliveTime` set, the hash's TTL with it.
    KeepAlive,
    /// 3.37's `trySetRate(.., timeToLive)`: no `keepAliveTime`, a TTL on the hash.
    WithTtl,
    /// Before 3.37: no `keepAliveTime`, no TTL.
    Classic,
    /// Lua's `tonumber` reads these, the module does not: `rate " 10"`, `interval 1000.5`.
    SpacedRate,
    DecimalInterval,
    /// A `type` other than `0`/`1`: the bodies take the overall state.
    OtherType,
    /// `keepAliveTime` not a number: 3.38+'s bodies fail on it, older ones never read it.
    BadKeepAlive,
    /// `name` holds another type.
    WrongType,
}

/// The window of the state in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    New,
    Fresh,
    Full,
    PartlyExpired,
    /// Every grant expired: 5 of them, and (`rate` 100) 100 of them.
    ExpiredSmall,
    ExpiredLarge,
    /// A release not yet folded: the value above `rate - S`.
    Released,
    /// The value below `rate - S` (3.17-3.34's `rate - ZCARD`).
    Low,
    /// Live grants past the rate (a rate lowered with its state kept).
    Over,
    GrantsNoValue,
    /// Grants of 0 permits (`tryAcquire(0)`), expired and live.
    ZeroGrants,
    NegativeScore,
    Malformed,
    SpacedValue,
    DecimalValue,
    JunkValue,
    ValueWrongType,
    PermitsWrongType,
    /// Value 0 and no grant: a refusal reads a nil score.
    EmptyLow,
    /// A value past what Lua's doubles hold exactly.
    Huge,
    /// Value and grants with TTLs of their own.
    Ttls,
}

pub const HASHES: [Hash; 11] = [
    Hash::Overall,
    Hash::PerClient,
    Hash::KeepAlive,
    Hash::WithTtl,
    Hash::Classic,
    Hash::SpacedRate,
    Hash::DecimalInterval,
    Hash::OtherType,
    Hash::BadKeepAlive,
    Hash::WrongType,
    Hash::Absent,
];

pub const WINDOWS: [Window; 21] = [
    Window::New,
    Window::Fresh,
    Window::Full,
    Window::PartlyExpired,
    Window::ExpiredSmall,
    Window::ExpiredLarge,
    Window::Released,
    Window::Low,
    Window::Over,
    Window::GrantsNoValue,
    Window::ZeroGrants,
    Window::NegativeScore,
    Window::Malformed,
    Window::SpacedValue,
    Window::DecimalValue,
    Window::JunkValue,
    Window::ValueWrongType,
    Window::PermitsWrongType,
    Window::EmptyLow,
    Window::Huge,
    Window::Ttls,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    pub hash: Hash,
    pub window: Window,
}

/// Every state run: each window under the limiter kinds Redisson makes, the odd hashes under
/// a few windows.
pub fn states() -> Vec<State> {
    let mut v = Vec::new();
    for hash in HASHES {
        let windows: &[Window] = match hash {
            Hash::Overall | Hash::PerClient => &WINDOWS,
            Hash::KeepAlive | Hash::WithTtl | Hash::Classic => {
                &[Window::New, Window::Fresh, Window::Full, Window::PartlyExpired, Window::Released, Window::Ttls]
            }
            Hash::Absent | Hash::WrongType => &[Window::New, Window::Fresh],
            _ => &[Window::New, Window::Fresh, Window::PartlyExpired],
        };
        v.extend(windows.iter().map(|&window| State { hash, window }));
    }
    v
}

/// The states Redisson's own calls make (one class alone on a limiter).
pub fn made_by_redisson(s: State) -> bool {
    use Window::*;
    matches!(s.hash, Hash::Overall | Hash::PerClient | Hash::KeepAlive | Hash::WithTtl | Hash::Classic)
        && matches!(
            s.window,
            New | Fresh
                | Full
                | PartlyExpired
                | ExpiredSmall
                | ExpiredLarge
                | Released
                | Low
                | Over
                | GrantsNoValue
                | ZeroGrants
                | Ttls
        )
}

pub fn b(s: impl ToString) -> Vec<u8> {
    s.to_string().into_bytes()
}

fn cmd(v: &[&[u8]]) -> Vec<Vec<u8>> {
    v.iter().map(|x| x.to_vec()).collect()
}

/// The five KEYS.
pub fn keys() -> Vec<String> {
    rl::keys(NAME, CLIENT)
}

/// The random bytes of the `i`-th grant a setup writes.
pub fn setup_random(i: usize) -> Vec<u8> {
    let mut r = vec![0x5a; 16];
    r[0] = i as u8;
    r[1] = (i >> 8) as u8;
    r
}

/// The random bytes of a call's grant: 16 bytes (3.21+), or 8 (before).
pub fn call_random(k: u8, short: bool) -> Vec<u8> {
    vec![0xc0 + k; if short { 8 } else { 16 }]
}

impl State {
    pub fn rate(self) -> i64 {
        if self.window == Window::ExpiredLarge {
            100
        } else {
            10
        }
    }

    /// The value and grant keys of the state in use.
    pub fn state_keys(self) -> (String, String) {
        let k = keys();
        if self.hash == Hash::PerClient {
            (k[2].clone(), k[4].clone())
        } else {
            (k[1].clone(), k[3].clone())
        }
    }

    /// The commands that make the state, on both sides.
    pub fn setup(self) -> Vec<Vec<Vec<u8>>> {
        let mut v = Vec::new();
        let rate = b(self.rate());
        let hset = |fields: &[(&str, Vec<u8>)]| {
            let mut c = vec![b"HSET".to_vec(), b(NAME)];
            for (f, x) in fields {
                c.push(b(f));
                c.push(x.clone());
            }
            c
        };
        let base = |t: &str| vec![("rate", rate.clone()), ("interval", b(INTERVAL)), ("type", b(t))];
        let with = |mut f: Vec<(&'static str, Vec<u8>)>, extra: (&'static str, Vec<u8>)| {
            f.push(extra);
            f
        };
        match self.hash {
            Hash::Absent => {}
            Hash::WrongType => v.push(cmd(&[b"SET", NAME.as_bytes(), b"x"])),
            Hash::Overall => v.push(hset(&with(base("0"), ("keepAliveTime", b(0))))),
            Hash::PerClient => v.push(hset(&with(base("1"), ("keepAliveTime", b(0))))),
            Hash::KeepAlive => {
                v.push(hset(&with(base("0"), ("keepAliveTime", b(LONG_MS)))));
                v.push(cmd(&[b"PEXPIRE", NAME.as_bytes(), &b(LONG_MS)]));
            }
            Hash::WithTtl => {
                v.push(hset(&base("0")));
                v.push(cmd(&[b"PEXPIRE", NAME.as_bytes(), &b(LONG_MS)]));
            }
            Hash::Classic => v.push(hset(&base("0"))),
            Hash::SpacedRate => v.push(hset(&[("rate", b(" 10")), ("interval", b(INTERVAL)), ("type", b("0"))])),
            Hash::DecimalInterval => {
                v.push(hset(&[("rate", rate.clone()), ("interval", b("1000.5")), ("type", b("0"))]))
            }
            Hash::OtherType => v.push(hset(&base("2"))),
            Hash::BadKeepAlive => v.push(hset(&with(base("0"), ("keepAliveTime", b("abc"))))),
        }
        let (vk, pk) = self.state_keys();
        if self.hash == Hash::PerClient {
            // The overall state beside, which a per-client call must leave alone.
            let k = keys();
            v.push(cmd(&[b"SET", k[1].as_bytes(), b"5"]));
            v.push(cmd(&[b"ZADD", k[3].as_bytes(), &b(NOW - 100), &member(&setup_random(900), 5)]));
        }
        let (value, grants): (Option<Vec<u8>>, Vec<(i64, u32)>) = match self.window {
            Window::New => (None, vec![]),
            Window::Fresh | Window::Ttls => (Some(b(7)), vec![(-500, 3)]),
            Window::Full => (Some(b(0)), vec![(-800, 4), (-300, 6)]),
            Window::PartlyExpired => (Some(b(1)), vec![(-1500, 4), (-1000, 2), (-200, 3)]),
            Window::ExpiredSmall => (Some(b(0)), (0..5).map(|i| (-2000 - i, 2)).collect()),
            Window::ExpiredLarge => (Some(b(0)), (0..100).map(|i| (-5000 - i, 1)).collect()),
            Window::Released => (Some(b(8)), vec![(-500, 6)]),
            Window::Low => (Some(b(3)), vec![(-500, 2)]),
            Window::Over => (Some(b(0)), vec![(-500, 8), (-400, 6)]),
            Window::GrantsNoValue => (None, vec![(-500, 4)]),
            Window::ZeroGrants => (Some(b(8)), vec![(-1500, 0), (-500, 0), (-400, 2)]),
            Window::NegativeScore => (Some(b(5)), vec![(-NOW - 5, 2), (-500, 3)]),
            Window::Malformed => (Some(b(8)), vec![(-400, 2)]),
            Window::SpacedValue => (Some(b(" 3")), vec![(-1500, 1), (-500, 6)]),
            Window::DecimalValue => (Some(b("2.5")), vec![(-1500, 1), (-500, 6)]),
            Window::JunkValue => (Some(b("abc")), vec![(-1500, 1), (-500, 6)]),
            Window::ValueWrongType | Window::PermitsWrongType => (None, vec![(-500, 3)]),
            Window::EmptyLow => (Some(b(0)), vec![]),
            Window::Huge => (Some(b(9_007_199_254_740_993_i64)), vec![(-1500, 5)]),
        };
        match self.window {
            Window::ValueWrongType => v.push(cmd(&[b"RPUSH", vk.as_bytes(), b"x"])),
            Window::PermitsWrongType => {}
            _ => {
                if let Some(value) = value {
                    v.push(cmd(&[b"SET", vk.as_bytes(), &value]));
                }
            }
        }
        if self.window == Window::PermitsWrongType {
            v.push(cmd(&[b"SET", vk.as_bytes(), b"7"]));
            v.push(cmd(&[b"HSET", pk.as_bytes(), b"f", b"v"]));
        } else {
            for (i, (at, p)) in grants.iter().enumerate() {
                v.push(cmd(&[b"ZADD", pk.as_bytes(), &b(NOW + at), &member(&setup_random(i), *p)]));
            }
        }
        if self.window == Window::Malformed {
            v.push(cmd(&[b"ZADD", pk.as_bytes(), &b(NOW - 1500), b"\x10short"]));
        }
        if self.window == Window::Ttls {
            v.push(cmd(&[b"PEXPIRE", vk.as_bytes(), &b(LONG_MS / 2)]));
            v.push(cmd(&[b"PEXPIRE", pk.as_bytes(), &b(LONG_MS * 2 / 3)]));
        }
        v
    }
}
