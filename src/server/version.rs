//! The module's one version number: Cargo.toml's `version`, shown everywhere from there.
//!
//! `MODULE LIST` takes an integer: Redis' modules encode `major.minor.patch` as
//! `major * 10000 + minor * 100 + patch` (RedisJSON 2.6.4 is 20604), so 0.1.0 is 100. It is
//! computed here at compile time from Cargo's own variables, so the two cannot drift.

/// This build's version, `major.minor.patch`, as in Cargo.toml.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// [`VERSION`] as `MODULE LIST` shows it.
pub const MODULE_VERSION: i32 = encode(
    number(env!("CARGO_PKG_VERSION_MAJOR")),
    number(env!("CARGO_PKG_VERSION_MINOR")),
    number(env!("CARGO_PKG_VERSION_PATCH")),
);

/// The release that introduced every command so far: the `since` of `COMMAND DOCS` and of
/// docs/commands.md. A command added later gets its own.
pub const FIRST_RELEASE: &str = "0.1.0";

/// `major.minor.patch` as one integer; minor and patch must stay below 100 (checked when the
/// constant is evaluated: a build with a version that does not fit fails).
pub const fn encode(major: i32, minor: i32, patch: i32) -> i32 {
    assert!(minor < 100 && patch < 100, "minor and patch must be below 100");
    major * 10000 + minor * 100 + patch
}

/// A decimal number at compile time (Cargo guarantees digits only).
const fn number(s: &str) -> i32 {
    let b = s.as_bytes();
    let mut i = 0;
    let mut n = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit(), "not a version number");
        n = n * 10 + (b[i] - b'0') as i32;
        i += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `major.minor.patch` parsed at run time, the independent side of the check.
    fn parts(v: &str) -> Vec<i32> {
        v.split('.').map(|p| p.parse().unwrap_or(-1)).collect()
    }

    #[rustfmt::skip]
    #[test]
    fn versions_encode_as_redis_modules_do() {
        for (major, minor, patch, want) in [
            (0, 1, 0,    100),
            (0, 2, 0,    200),
            (1, 0, 0,  10000),
            (2, 6, 4,  20604),
            (1, 99, 99, 19999),
        ] {
            assert_eq!(encode(major, minor, patch), want);
        }
    }

    #[test]
    fn the_module_version_is_cargos() {
        let p = parts(VERSION);
        assert_eq!(p.len(), 3, "{VERSION}");
        assert_eq!(MODULE_VERSION, p[0] * 10000 + p[1] * 100 + p[2]);
    }

    #[test]
    fn the_first_release_is_not_after_this_one() {
        assert!(parts(FIRST_RELEASE) <= parts(VERSION), "{FIRST_RELEASE} > {VERSION}");
    }

    /// docs/commands.md says when each command appeared: the same as `COMMAND DOCS`.
    #[test]
    fn the_docs_give_every_command_the_metadata_since() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/commands.md");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let since: Vec<&str> = text
            .split("**Available since** ")
            .skip(1)
            .map(|rest| rest.split([' ', '\n']).next().unwrap_or("").trim_end_matches('.'))
            .collect();
        assert!(since.len() >= 15, "found {since:?}");
        assert!(since.iter().all(|s| *s == FIRST_RELEASE), "{since:?} != {FIRST_RELEASE}");
    }
}
