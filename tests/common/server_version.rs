//! The release of the server under test, read from `<binary> --version`, and what the tests
//! expect of each release where Redis and Valkey releases behave differently (each rule
//! names the server source that shows it).

use std::sync::OnceLock;

use super::server_binary;

/// A server release: which server, and its version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Release {
    pub valkey: bool,
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl Release {
    /// The version as `RM_GetServerVersion` gives it (0x00MMmmpp).
    pub fn number(&self) -> u32 {
        (self.major << 16) | (self.minor << 8) | self.patch
    }
}

/// Parses `Redis server v=7.2.4 sha=...` or `Valkey server v=9.1.2 ...`.
pub fn parse(version_line: &str) -> Option<Release> {
    let v = version_line.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
    let (major, minor, patch) = (parts.next()??, parts.next()??, parts.next()??);
    Some(Release { valkey: version_line.to_ascii_lowercase().starts_with("valkey"), major, minor, patch })
}

/// The release of the server the tests run (`server_binary()`).
pub fn release() -> Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    *RELEASE.get_or_init(|| {
        let out = std::process::Command::new(server_binary())
            .arg("--version")
            .output()
            .unwrap_or_else(|e| panic!("cannot run {} --version: {e}", server_binary()));
        let line = String::from_utf8_lossy(&out.stdout).to_string();
        parse(&line).unwrap_or_else(|| panic!("no version in {line:?}"))
    })
}

/// `INFO lockmod`'s `answer_order` on this release (docs/design.md, "A grant and its reply"):
/// Redis 7.0 answers from its before-sleep event; Redis 7.2 and Valkey 7.2 (7.1.x: 7.2's
/// release candidates) through the module's own handle, or where `LOCKMOD_TEST_ANSWER_ORDER`
/// asks for it on a later release; Redis 7.4+ (7.3.x: its candidates) and Valkey 8+ at once.
pub fn answer_order() -> &'static str {
    let n = release().number();
    let forced = std::env::var("LOCKMOD_TEST_ANSWER_ORDER").is_ok_and(|v| v == "handover");
    if n < 0x07_01_00 {
        "before-sleep-event"
    } else if n < 0x07_03_00 || forced {
        "handover"
    } else {
        "immediate"
    }
}

/// The error Redis itself gives when a key spec refuses a user the key: Redis 7.0's wording,
/// or that of Redis 7.2+ and Valkey (`getAclErrorMessage`, src/acl.c).
pub fn key_denied() -> &'static str {
    let r = release();
    if r.valkey || r.number() >= 0x07_02_00 {
        "NOPERM No permissions to access a key"
    } else {
        "NOPERM this user has no permissions to access one of the keys used as arguments"
    }
}

/// Whether the server's Lua passes a number to a command in the shortest form, `1e+14`
/// (`fpconv_dtoa` in `luaArgsToRedisArgv`, src/script_lua.c): Redis 7.1.x to 7.2.4 and
/// Valkey 7.2.4 and 7.2.5 (redis/redis#13113, fixed by #13115 in Redis 7.2.5 and Valkey
/// 7.2.6). Redis 7.0 (`%.17g`) and later releases (integers as integers) write
/// `100000000000000`.
pub fn lua_numbers_shortest() -> bool {
    let r = release();
    let n = r.number();
    if r.valkey {
        (0x07_02_04..0x07_02_06).contains(&n)
    } else {
        (0x07_01_00..0x07_02_05).contains(&n)
    }
}

/// A published message as every release but those of [`lua_numbers_shortest`] writes it: a
/// whole number in `1e+14` form as its digits. Other messages unchanged.
pub fn integer_message(m: &str) -> String {
    if !m.contains('e') {
        return m.to_string();
    }
    match m.parse::<f64>() {
        Ok(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => format!("{}", f as i64),
        _ => m.to_string(),
    }
}
