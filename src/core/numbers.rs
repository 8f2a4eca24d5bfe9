//! Numbers as Redis reads and checks them: decimal parsing, and the deadline and count
//! checks every command makes before its first write.

use super::error::LockError;
use super::reply::Result;

/// The absolute time `ms` after `now`, or `InvalidExpire` where Redis' `SET ... PX` would
/// refuse it: past `i64::MAX` ms (what `PEXPIREAT` and `SET ... PXAT` accept), or not after
/// the epoch. Every deadline a command writes is computed here before its first write, so an
/// overflow is an error that changes nothing, never a wrapped or saturated expiry.
pub fn deadline(now: i64, ms: i64) -> Result<i64> {
    match now.checked_add(ms) {
        Some(at) if at > 0 => Ok(at),
        _ => Err(LockError::InvalidExpire("")),
    }
}

/// Checks that one more hold (or token) fits: `HINCRBY`'s overflow rule, before any write.
pub fn incremented(count: i64, by: i64) -> Result<i64> {
    count.checked_add(by).ok_or(LockError::Overflow)
}

/// The largest count a Redisson body is answered natively for: Lua computes in doubles and
/// the server formats them back (`%.14g`-like formats turn 1e14 into `1e+14`), so beyond this
/// the module's integers and the Lua's text may part.
pub const LUA_SAFE: i64 = 99_999_999_999_999;

/// A canonical integer within ±[`LUA_SAFE`]: one Lua's `tonumber` and the module read alike.
pub fn lua_safe_int(b: &[u8]) -> Option<i64> {
    parse_i64(b).filter(|v| (-LUA_SAFE..=LUA_SAFE).contains(v))
}

/// Parses a decimal integer the way Redis does (no spaces, no `+`, no leading zeros).
/// Every acquire parses its lease with it, so it allocates nothing.
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, b),
    };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || negative)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        // Accumulated with the sign, so i64::MIN parses and one past it does not.
        v = v.checked_mul(10)?;
        v = if negative { v.checked_sub(d)? } else { v.checked_add(d)? };
    }
    Some(v)
}

#[cfg(test)]
mod parse_tests {
    use super::parse_i64;

    /// The canonical form: what `i64::to_string` prints back, and nothing else.
    #[test]
    fn integers_parse_only_in_their_canonical_form() {
        let reference = |s: &str| s.parse::<i64>().ok().filter(|v| v.to_string() == s);
        for s in [
            "0",
            "1",
            "-1",
            "30000",
            "007",
            "-0",
            "+5",
            "",
            "-",
            " 1",
            "1 ",
            "1a",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "00",
            "10",
            "-10",
        ] {
            assert_eq!(parse_i64(s.as_bytes()), reference(s), "{s:?}");
        }
    }
}

/// A stack buffer for formatting integers without allocating, as Redis prints them.
#[derive(Default)]
pub struct IntBuf([u8; 24], usize);

/// "00" to "99": two digits per division (a lease's absolute expiry has 13).
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
    2021222324252627282930313233343536373839\
    4041424344454647484950515253545556575859\
    6061626364656667686970717273747576777879\
    8081828384858687888990919293949596979899";

impl IntBuf {
    pub fn format(&mut self, n: i64) -> &[u8] {
        let mut v = n.unsigned_abs();
        let mut i = self.0.len();
        while v >= 100 {
            let d = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
        }
        if v >= 10 {
            let d = v as usize * 2;
            i -= 2;
            self.0[i..i + 2].copy_from_slice(&PAIRS[d..d + 2]);
        } else {
            i -= 1;
            self.0[i] = b'0' + v as u8;
        }
        if n < 0 {
            i -= 1;
            self.0[i] = b'-';
        }
        self.1 = i;
        &self.0[i..]
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn integers_format_as_redis_prints_them() {
        for n in [0, 1, 9, 10, 99, 100, 101, 12345, -1, -10, -99, -100, 1_700_000_000_123, i64::MAX, i64::MIN] {
            assert_eq!(super::IntBuf::default().format(n), n.to_string().as_bytes(), "{n}");
        }
    }
}
