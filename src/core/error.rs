//! The errors a lock command can reply, each with its Redis error code.

use std::fmt;

/// Every error a command can return. `Display` gives the exact Redis error line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockError {
    /// `ERR wrong number of arguments for '<command>' command`
    WrongArity(&'static str),
    /// A number argument that does not parse as a 64-bit integer.
    NotInteger,
    /// A time argument that must be positive.
    NotPositive(&'static str),
    /// A count that must not be negative (a synchronizer's permits or count), naming it.
    Negative(&'static str),
    /// A permit id of the expirable semaphore that is not hex (Redisson's ids are 16 bytes,
    /// written as 32 hex digits).
    BadPermitId,
    /// A `BLOCK` timeout below 0.
    NegativeTimeout,
    /// A time whose deadline (now + ms, or one derived from the keyspace) would not fit in a
    /// signed 64-bit ms timestamp, the limit of `PEXPIREAT`: Redis' `SET ... PX` error, naming
    /// the command. The core leaves the name empty; [`LockError::in_command`] fills it in.
    InvalidExpire(&'static str),
    /// A hold count or fencing counter that would pass the 64-bit range (`HINCRBY`'s error).
    Overflow,
    /// An unknown option or misplaced word.
    Syntax,
    /// A key (the lock or a key derived from it) holds another type.
    WrongType,
    /// A lock hash field that should be a hold count holds something else.
    CorruptHoldCount,
    /// The read-write lock's owner named `mode`, which would collide with the mode field.
    ReservedOwner,
    /// The caller's ACL does not allow a key or channel the command would touch.
    NoPerm(Denied, Vec<u8>),
    /// Not an error: the client was parked and will be answered later.
    Blocked,
    /// Redis Cluster: a derived key or channel of the name lies in another hash slot (a name
    /// with an empty or unclosed hash tag), as Redisson's script gets it from the cluster.
    CrossSlot,
    /// Any other bad input or state, as the line after `ERR ` (GCRA's and CL.THROTTLE's, whose
    /// wording follows the commands they stand in for).
    Invalid(&'static str),
    /// The rate limiter's hash lacks `rate`, `interval` or `type` (Redisson's assert).
    NotInitialized,
    /// More permits asked of a rate limiter than its rate (Redisson's assert).
    ExceedsRate,
    /// A rate limiter hash field the module cannot read: its name.
    BadLimiterField(&'static str),
    /// A member of a rate limiter's grant zset that is not `struct.pack('Bc0I', ...)`.
    BadGrant,
    /// A `PER_CLIENT` rate limiter used without `CLIENT id`.
    ClientRequired,
    /// A rate limiter's permits outside 1..=2^32-1 (what a grant member can hold).
    PermitsRange,
    /// A rate limiter's `KEEPALIVE` shorter than its interval (Redisson's check).
    KeepAliveShort,
    /// `NOW` given with `BLOCK`: a parked client waits on the server's clock.
    NowWithBlock,
    /// A `NOW` that is not a time a score can hold exactly.
    NowRange,
}

/// What a `NOPERM` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Key,
    Channel,
    /// The user a parked client ran as no longer exists.
    User,
}

/// Names in errors are cut here: an owner is client-chosen and may be long.
const MAX_NAME_IN_ERROR: usize = 200;

fn shown(name: &[u8]) -> String {
    let cut = &name[..name.len().min(MAX_NAME_IN_ERROR)];
    let s = String::from_utf8_lossy(cut).replace(['\r', '\n'], " ");
    if cut.len() < name.len() {
        format!("{s}...")
    } else {
        s
    }
}

impl LockError {
    /// Names `cmd` (lowercase, as registered) in an error that names its command.
    pub fn in_command(self, cmd: &'static str) -> LockError {
        match self {
            LockError::InvalidExpire(_) => LockError::InvalidExpire(cmd),
            e => e,
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::WrongArity(cmd) => write!(f, "ERR wrong number of arguments for '{cmd}' command"),
            LockError::NotInteger => f.write_str("ERR value is not an integer or out of range"),
            LockError::NotPositive(what) => write!(f, "ERR {what} must be a positive integer"),
            LockError::Negative(what) => write!(f, "ERR {what} must be a non-negative integer"),
            LockError::BadPermitId => f.write_str("ERR permit id must be an even number of hex digits"),
            LockError::NegativeTimeout => {
                f.write_str("ERR timeout must be a non-negative integer (ms; 0 waits without a limit)")
            }
            LockError::InvalidExpire(cmd) => write!(f, "ERR invalid expire time in '{cmd}' command"),
            LockError::Overflow => f.write_str("ERR increment or decrement would overflow"),
            LockError::Syntax => f.write_str("ERR syntax error"),
            LockError::WrongType => f.write_str("WRONGTYPE Operation against a key holding the wrong kind of value"),
            LockError::CorruptHoldCount => f.write_str("ERR lock hash field is not an integer hold count"),
            LockError::ReservedOwner => f.write_str("ERR owner name 'mode' is reserved by the read-write lock"),
            // Redis' own wording for a denied key or channel, naming it.
            LockError::NoPerm(Denied::Key, n) => write!(f, "NOPERM No permissions to access the '{}' key", shown(n)),
            LockError::NoPerm(Denied::Channel, n) => {
                write!(f, "NOPERM No permissions to access the '{}' channel", shown(n))
            }
            LockError::NoPerm(Denied::User, n) => write!(f, "NOPERM The user '{}' no longer exists", shown(n)),
            LockError::Blocked => f.write_str("ERR client blocked"),
            LockError::CrossSlot => f.write_str("CROSSSLOT Keys in request don't hash to the same slot"),
            LockError::Invalid(text) => write!(f, "ERR {text}"),
            // Redisson's own words, which its users search for.
            LockError::NotInitialized => f.write_str("ERR RateLimiter is not initialized"),
            LockError::ExceedsRate => f.write_str("ERR Requested permits amount cannot exceed defined rate"),
            LockError::BadLimiterField(field) => {
                let want = match *field {
                    "type" => "0 or 1",
                    "keepAliveTime" => "an integer",
                    _ => "an integer of at least 1",
                };
                write!(
                    f,
                    "ERR rate limiter field '{field}' is not {want}: the limiter's hash is not one Redisson writes"
                )
            }
            LockError::BadGrant => {
                f.write_str("ERR rate limiter grant is not struct.pack('Bc0I', #random, random, permits)")
            }
            LockError::ClientRequired => f.write_str("ERR a PER_CLIENT rate limiter needs CLIENT id"),
            LockError::PermitsRange => f.write_str("ERR permits must be an integer from 1 to 4294967295"),
            LockError::KeepAliveShort => f.write_str("ERR keepalive must be at least the interval"),
            LockError::NowWithBlock => f.write_str("ERR NOW cannot be combined with BLOCK"),
            LockError::NowRange => f.write_str("ERR NOW must be a time in ms from 0 to 9007199254740992"),
        }
    }
}
