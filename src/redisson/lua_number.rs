//! What Lua's `tonumber` makes of a stored value, as far as a native answer depends on it:
//! `super::exec` (hold counts in a lock hash) and `super::sync::exec` (a synchronizer's count).

use crate::core::parse_i64;

/// What Lua's `tonumber` makes of a hash value.
pub(super) enum LuaNumber {
    Int(i64),
    NotANumber,
    /// A number the module does not read the same way (`" 3"`, `"3.0"`, `"0x3"`, `"inf"`).
    Unsure,
}

/// True if Lua's `tonumber` may read `v` as a number (an integer, or a form the module does not
/// read as one: `" 3"`, `"2.0"`, `"0x3"`).
pub(super) fn lua_reads_number(v: &[u8]) -> bool {
    !matches!(lua_number(v), LuaNumber::NotANumber)
}

pub(super) fn lua_number(v: &[u8]) -> LuaNumber {
    if let Some(n) = parse_i64(v) {
        return LuaNumber::Int(n);
    }
    let t = v.trim_ascii().to_ascii_lowercase();
    let special = [&b"inf"[..], b"infinity", b"nan"].iter().any(|w| t.strip_prefix(b"-").unwrap_or(&t) == *w);
    if !special && !t.iter().any(u8::is_ascii_digit) {
        LuaNumber::NotANumber
    } else {
        LuaNumber::Unsure
    }
}
