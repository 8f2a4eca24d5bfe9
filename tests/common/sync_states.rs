//! The kinds of synchronizer state `tests/redisson/redisson_sync_states.rs` puts each of Redisson's
//! synchronizer bodies in front of, the commands that make them, and the calls each body is
//! sent with there (KEYS and ARGV from `super::sync_calls`).
//!
//! A state is what `name` holds ([`Value`]) and what `{name}:timeout` holds ([`Leases`]). The
//! caller's permit ids are [`MINE`] and [`MINE2`]; another client's are [`THEIRS`] and
//! [`THEIRS2`]. Live leases end [`FAR_MS`] from now, so no reclaim timer the native side arms
//! fires while the test runs; expired ones ended 5 s ago and are written right before the call,
//! on both sides alike, under another name then `RENAME`d: a `ZADD` to `{name}:timeout` itself
//! would have the native side return the expired permits before the call (issue 29: leases
//! come back whoever wrote them), where this test puts each body in front of them.

use super::sync_calls::{self as sc, Choices, Family, Role, NO_LEASE};

pub const NAME: &str = "sem";
pub const MINE: [u8; 16] = [0x11; 16];
pub const MINE2: [u8; 16] = [0x12; 16];
pub const THEIRS: [u8; 16] = [0x21; 16];
pub const THEIRS2: [u8; 16] = [0x22; 16];
/// The ids an acquire takes.
pub const NEW1: [u8; 16] = [0x31; 16];
pub const NEW2: [u8; 16] = [0x32; 16];
/// How far live leases (and the calls' `until`) are: beyond the test's runtime.
pub const FAR_MS: i64 = 600_000;
/// The TTL of `trySetPermits(permits, ttl)` and of a semaphore given one.
pub const TTL_MS: i64 = 30_000;

/// What `name` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    Absent,
    Zero,
    One,
    Many,
    /// Below zero (`addPermits(-n)`).
    Negative,
    /// `3` with a TTL (`trySetPermits(3, ttl)`, or `expire`).
    Ttl,
    /// 10^14 - 1: the largest count the server formats as an integer from a Lua double.
    Max14,
    /// 10^14: Lua writes it back as `1e+14`.
    Over14,
    /// 2^53 + 1 and -(2^53 + 1): beyond what a double holds exactly.
    Past53,
    Below53,
    /// The top of the 64-bit range: one more overflows `INCRBY`.
    I64Max,
    /// Read by Lua's `tonumber`, not as an integer by the module.
    Spaced,
    Decimal,
    NotANumber,
    /// Another type under the name.
    WrongType,
}

/// What `{name}:timeout` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leases {
    None,
    /// The caller holds two live permits, another client one.
    Mine,
    /// The caller holds one (not [`MINE2`]), another client one.
    MineOnly,
    /// Another client holds one; the caller's ids are absent.
    Theirs,
    /// The caller's [`MINE`] expired (not reclaimed), [`MINE2`] and another's live.
    MineExpired,
    /// Another client's two permits expired (not reclaimed), the caller's two live.
    TheirsExpired,
    /// The caller's two permits taken without a lease (Redisson's no-lease score).
    MineNoLease,
    /// Another client's permit taken without a lease.
    TheirsNoLease,
    /// Another type under the timeout zset's name.
    WrongType,
    /// The caller's permit scored below 0 (never reclaimed), another's live: no Redisson
    /// client writes it.
    BelowZero,
    /// Another's lease ends at a fractional ms (a refusal names it as the server formats it).
    Fractional,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    pub value: Value,
    pub leases: Leases,
}

/// The values a Redisson client makes.
pub const MADE: [Value; 6] = [Value::Absent, Value::Zero, Value::One, Value::Many, Value::Negative, Value::Ttl];
const ODD: [Value; 9] = [
    Value::Max14,
    Value::Over14,
    Value::Past53,
    Value::Below53,
    Value::I64Max,
    Value::Spaced,
    Value::Decimal,
    Value::NotANumber,
    Value::WrongType,
];
const ALL_LEASES: [Leases; 11] = [
    Leases::None,
    Leases::Mine,
    Leases::MineOnly,
    Leases::Theirs,
    Leases::MineExpired,
    Leases::TheirsExpired,
    Leases::MineNoLease,
    Leases::TheirsNoLease,
    Leases::WrongType,
    Leases::BelowZero,
    Leases::Fractional,
];

/// Every state a body of `fam` meets: the expirable semaphore's on every kind of lease set
/// (the odd values on three), the others' beside no lease set and a live one (which they
/// must ignore).
pub fn states(expirable: bool) -> Vec<State> {
    let mut v = Vec::new();
    for value in MADE {
        for leases in ALL_LEASES {
            if expirable || matches!(leases, Leases::None | Leases::Mine) {
                v.push(State { value, leases });
            }
        }
    }
    for value in ODD {
        let few: &[Leases] = if expirable {
            &[Leases::None, Leases::Mine, Leases::TheirsExpired]
        } else {
            &[Leases::None, Leases::Mine]
        };
        v.extend(few.iter().map(|&leases| State { value, leases }));
    }
    v
}

fn cmd(args: &[&[u8]]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.to_vec()).collect()
}

/// The commands that make `state` under [`NAME`] at `now` (ms).
pub fn setup(state: State, now: i64) -> Vec<Vec<Vec<u8>>> {
    let name = NAME.as_bytes();
    let ttl = TTL_MS.to_string();
    let value: &[u8] = match state.value {
        Value::Absent | Value::WrongType => b"",
        Value::Zero => b"0",
        Value::One => b"1",
        Value::Many => b"5",
        Value::Negative => b"-2",
        Value::Ttl => b"3",
        Value::Max14 => b"99999999999999",
        Value::Over14 => b"100000000000000",
        Value::Past53 => b"9007199254740993",
        Value::Below53 => b"-9007199254740993",
        Value::I64Max => b"9223372036854775807",
        Value::Spaced => b" 3",
        Value::Decimal => b"2.0",
        Value::NotANumber => b"abc",
    };
    let mut v = match state.value {
        Value::Absent => vec![],
        Value::WrongType => vec![cmd(&[b"HSET", name, b"f", b"1"])],
        Value::Ttl => vec![cmd(&[b"SET", name, value, b"PX", ttl.as_bytes()])],
        _ => vec![cmd(&[b"SET", name, value])],
    };
    let z = sc::timeouts(NAME);
    let (live, gone, nl) = ((now + FAR_MS).to_string(), (now - 5_000).to_string(), NO_LEASE.to_string());
    let later = (now + FAR_MS + 1_000).to_string();
    let gone2 = (now - 4_000).to_string();
    let scratch = format!("{NAME}-leases-being-written");
    let mut zadd = |pairs: &[(&str, &[u8; 16])]| {
        let mut c = cmd(&[b"ZADD", scratch.as_bytes()]);
        for (score, id) in pairs {
            c.extend([score.as_bytes().to_vec(), id.to_vec()]);
        }
        v.push(c);
        v.push(cmd(&[b"RENAME", scratch.as_bytes(), z.as_bytes()]));
    };
    match state.leases {
        Leases::None => {}
        Leases::Mine => zadd(&[(&live, &MINE), (&live, &MINE2), (&later, &THEIRS)]),
        Leases::MineOnly => zadd(&[(&live, &MINE), (&later, &THEIRS)]),
        Leases::Theirs => zadd(&[(&later, &THEIRS)]),
        Leases::MineExpired => zadd(&[(&gone, &MINE), (&live, &MINE2), (&later, &THEIRS)]),
        Leases::TheirsExpired => zadd(&[(&gone, &THEIRS), (&gone2, &THEIRS2), (&live, &MINE), (&live, &MINE2)]),
        Leases::MineNoLease => zadd(&[(&nl, &MINE), (&nl, &MINE2)]),
        Leases::TheirsNoLease => zadd(&[(&nl, &THEIRS)]),
        Leases::WrongType => v.push(cmd(&[b"SET", z.as_bytes(), b"not-a-zset"])),
        Leases::BelowZero => zadd(&[("-5", &MINE), (&later, &THEIRS)]),
        Leases::Fractional => zadd(&[(&format!("{later}.5"), &THEIRS), (&live, &MINE)]),
    }
    v
}

/// A call of a body in a state: its free choices, and whether Redisson sends it so.
pub struct Variant {
    pub label: &'static str,
    pub permits: i64,
    pub ids: Vec<[u8; 16]>,
    /// Absolute lease end as an offset from now, or `None` for no lease.
    pub lease: Option<i64>,
    /// False for a call no public method of the body's releases makes.
    pub sent: bool,
}

fn v(label: &'static str, permits: i64, ids: &[[u8; 16]], lease: Option<i64>) -> Variant {
    Variant { label, permits, ids: ids.to_vec(), lease, sent: true }
}

/// The calls each body is sent with in every state.
pub fn variants(role: Role) -> Vec<Variant> {
    use Role::*;
    let far = Some(FAR_MS);
    match role {
        SemAcquire => vec![v("1", 1, &[], None), v("3", 3, &[], None)],
        SemAdd { .. } | PAdd { .. } => vec![v("+2", 2, &[], None), v("-3", -3, &[], None)],
        PAcquireOne { .. } => vec![
            v("1 lease", 1, &[NEW1], far),
            v("1 no lease", 1, &[NEW1], None),
            Variant { sent: false, ..v("2 one id", 2, &[NEW1], far) },
        ],
        PAcquireIds => vec![v("1 lease", 1, &[NEW1], far), v("2 no lease", 2, &[NEW1, NEW2], None)],
        PReleaseOne { .. } | PUpdateLease { .. } | PLeaseTime => vec![v("mine", 0, &[MINE], far)],
        PReleaseEach | PReleaseAll => vec![v("mine", 0, &[MINE], None), v("mine, mine2", 0, &[MINE, MINE2], None)],
        PSetPermits { .. } => vec![v("3", 3, &[], None), v("7", 7, &[], None)],
        _ => vec![v("3", 3, &[], None)],
    }
}

/// The call's KEYS and ARGV at `now` (ms).
pub fn call(sha: &str, variant: &Variant, publish: &str, now: i64) -> sc::Call {
    let until = variant.lease.map_or(NO_LEASE.to_string(), |l| (now + l).to_string());
    let c = Choices {
        permits: variant.permits,
        ids: variant.ids.clone(),
        until,
        now,
        ttl_ms: TTL_MS,
        publish: publish.to_string(),
    };
    sc::call(sha, NAME, &c)
}

/// The bodies no native command answers (docs/configuration.md says why).
pub fn not_accelerated(role: Role) -> bool {
    use Role::*;
    matches!(role, SemReleaseIfExists | LatchDelete { .. } | PTotal { .. } | PLeaseTime | PAdd { .. })
}

/// Ordinary use: a body sent by its own class on a state that class makes. Such calls must
/// all run natively.
pub fn ordinary(sha: &str, state: State, variant: &Variant) -> bool {
    let role = sc::role(sha);
    if not_accelerated(role) || !variant.sent || !MADE.contains(&state.value) {
        return false;
    }
    let fams = sc::families(sha);
    let made = !matches!(state.leases, Leases::WrongType | Leases::BelowZero | Leases::Fractional);
    if fams.contains(&Family::Expirable) && made {
        return true;
    }
    if fams.contains(&Family::Latch) {
        return state.leases == Leases::None && !matches!(state.value, Value::Negative | Value::Ttl);
    }
    state.leases == Leases::None
}

/// Whether a call names its publish command (an argument since 3.22): lower case is sent too.
pub fn takes_publish(argv: &[Vec<u8>]) -> bool {
    argv.iter().any(|a| a == b"PUBLISH")
}
