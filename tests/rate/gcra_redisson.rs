//! Redisson's `RGcra` unchanged on a server without `GCRA` (issue 30): exactly what each
//! release sends. 4.4.0 to 4.6.1 call `GCRA name maxBurst tokensPerPeriod seconds [TOKENS n]`
//! directly; 4.7.0 on keep the rate in the hash `{name}:config` and call `GCRA` from three Lua
//! bodies (`EVALSHA`, then `EVAL` on `NOSCRIPT`), test data read from
//! `../shared/redisson-ratelimiter-scripts/` (or `$LOCKMOD_REDISSON_RATELIMITER_SCRIPTS`).
//! Replies are read as `GcraResultDecoder` reads them: exactly five integers.

use crate::common;

use std::path::PathBuf;

use common::gcra::{five, server_us, tat, GCRA_PER_MS};
use common::*;

fn scripts_dir() -> PathBuf {
    match std::env::var_os("LOCKMOD_REDISSON_RATELIMITER_SCRIPTS") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/redisson-ratelimiter-scripts"),
    }
}

/// `RedissonGcra`'s bodies (4.7.0 to HEAD), by the first 8 hex digits of their SHA1.
const TRY_SET_RATE: &str = "31e2744e";
const SET_RATE: &str = "704cc2c3";
const TRY_ACQUIRE: &str = "6a25e0dd";

/// The body whose SHA1 starts with `sha8` (its full SHA1, its text). Missing: the test fails.
fn body(sha8: &str) -> (String, String) {
    let dir = scripts_dir().join("scripts");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "Redisson's rate-limiter scripts are missing at {} ({e}): set LOCKMOD_REDISSON_RATELIMITER_SCRIPTS",
            dir.display()
        )
    });
    let path = entries
        .flatten()
        .map(|e| e.path())
        .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(sha8)));
    let path = path.unwrap_or_else(|| panic!("no body {sha8}*.lua in {}", dir.display()));
    let text = std::fs::read_to_string(&path).expect("body");
    let sha = sha1_smol::Sha1::from(&text).digest().to_string();
    assert!(sha.starts_with(sha8), "{} is not its own SHA1", path.display());
    (sha, text)
}

/// Sends a body as Redisson does: `EVALSHA`, and on `NOSCRIPT` the body by `EVAL`.
fn redisson_eval(c: &mut redis::Connection, sha8: &str, keys: &[&str], argv: &[&str]) -> Result<Value, String> {
    let (sha, text) = body(sha8);
    let n = keys.len().to_string();
    let mut args = vec!["EVALSHA", sha.as_str(), n.as_str()];
    args.extend(keys);
    args.extend(argv);
    match call(c, &args) {
        Err(e) if e.starts_with("NOSCRIPT") => {
            args[0] = "EVAL";
            args[1] = &text;
            call(c, &args)
        }
        other => other,
    }
}

/// `times` calls of a body in one `MULTI` (as an `RBatch` sends them), loaded first so that
/// `EVALSHA` finds it: calls a few microseconds apart, so a table of replies holds however
/// loaded the machine. Each reply as five integers.
fn redisson_evals_at_once(
    c: &mut redis::Connection,
    sha8: &str,
    keys: &[&str],
    argv: &[&str],
    times: usize,
) -> Vec<[i64; 5]> {
    let (sha, text) = body(sha8);
    let loaded: String = redis::cmd("SCRIPT").arg("LOAD").arg(&text).query(c).expect("SCRIPT LOAD");
    assert_eq!(loaded, sha);
    let mut p = redis::pipe();
    p.atomic();
    for _ in 0..times {
        p.cmd("EVALSHA").arg(&sha).arg(keys.len()).arg(keys).arg(argv);
    }
    let replies: Vec<Value> = p.query(c).expect("EXEC");
    replies.iter().map(five).collect()
}

/// The keys of `RGcra` named `name`: `{name}:config` and `name`.
fn keys_of(name: &str) -> (String, String) {
    (format!("{{{name}}}:config"), name.to_string())
}

#[test]
fn redisson_4_4_to_4_6_call_gcra_directly_and_decode_its_reply() {
    let s = Server::start();
    let mut c = s.conn();
    // testDeprecatedTryAcquire: tryAcquire(2, 4, Duration.ofSeconds(1)), four times (at once:
    // 250 ms apart, the fourth must come before a token is back).
    let call: &[&str] = &["GCRA", "testDeprecatedTryAcquire", "2", "4", "1"];
    let replies = common::gcra::in_one_exec(&mut c, &[call; 4]);
    assert_eq!(replies.iter().map(|r| r[0]).collect::<Vec<_>>(), [0, 0, 0, 1], "limited on the fourth");
    assert!(replies.iter().all(|r| r[1] == 3), "maxTokens = maxBurst + 1: {replies:?}");
    assert_eq!(replies[0][3], -1);
    assert!(replies[3][3] >= 0);
    // tryAcquire(2, 4, Duration.ofMillis(250), 2): period as BigDecimal.toPlainString, TOKENS.
    assert_eq!(five(&ok(&mut c, &["GCRA", "t", "2", "4", "0.25", "TOKENS", "2"])), [0, 3, 1, -1, 1]);
}

#[test]
fn redisson_4_7_sets_the_rate_in_its_config_hash_and_acquires_through_lua() {
    let s = Server::start();
    let mut c = s.conn();
    let (config, name) = keys_of("testTryAcquire");
    let (k, n) = (&[config.as_str()][..], &[config.as_str(), name.as_str()][..]);
    // trySetRate(2, 4, 1 s) sets it; a second trySetRate keeps it.
    assert_eq!(redisson_eval(&mut c, TRY_SET_RATE, k, &["2", "4", "1"]), Ok(Value::Int(1)));
    assert_eq!(redisson_eval(&mut c, TRY_SET_RATE, k, &["10", "20", "5"]), Ok(Value::Int(0)));
    assert_eq!(hgetall(&mut c, &config), map(&[("maxBurst", "2"), ("rate", "4"), ("period", "1")]));
    let t0 = server_us(&mut c);
    let replies = redisson_evals_at_once(&mut c, TRY_ACQUIRE, n, &["1"], 4);
    assert_eq!(replies.iter().map(|r| r[0]).collect::<Vec<_>>(), [0, 0, 0, 1]);
    assert!(replies.iter().all(|r| r[1] == 3) && replies[3][3] >= 0, "{replies:?}");
    // The limiter is `name`: a TAT three intervals (750 ms) after the first call.
    let stored = tat(&mut c, &name).expect("the TAT");
    assert!(stored >= t0 / 1000 * 1000 + 750_000, "{stored}");
    assert_eq!(pexpiretime(&mut c, &name), common::gcra::expiry_of(stored, GCRA_PER_MS));
    assert_eq!(pttl(&mut c, &config), -1, "the config never expires");
    // tryAcquire(2): the body's TOKENS branch.
    let (config2, name2) = keys_of("testTryAcquireWithTokens");
    redisson_eval(&mut c, TRY_SET_RATE, &[&config2], &["2", "4", "0.25"]).expect("trySetRate");
    let reply = redisson_eval(&mut c, TRY_ACQUIRE, &[&config2, &name2], &["2"]).expect("tryAcquire(2)");
    assert_eq!(five(&reply), [0, 3, 1, -1, 1]);
}

#[test]
fn redisson_4_7_set_rate_resets_the_limiter_and_an_unset_rate_is_the_scripts_error() {
    let s = Server::start();
    let mut c = s.conn();
    let (config, name) = keys_of("testSetRate");
    let n = &[config.as_str(), name.as_str()][..];
    let err = redisson_eval(&mut c, TRY_ACQUIRE, n, &["1"]).expect_err("no rate yet");
    assert!(err.contains("GCRA rate is not set"), "{err}");
    redisson_eval(&mut c, TRY_SET_RATE, &[&config], &["2", "4", "1"]).expect("trySetRate");
    let limited: Vec<i64> = redisson_evals_at_once(&mut c, TRY_ACQUIRE, n, &["1"], 4).iter().map(|r| r[0]).collect();
    assert_eq!(limited, [0, 0, 0, 1]);
    // setRate(5, 10, 2 s): overwrites the rate and deletes the limiter's state.
    assert_eq!(redisson_eval(&mut c, SET_RATE, n, &["5", "10", "2"]), Ok(Value::Nil));
    assert_eq!(hgetall(&mut c, &config), map(&[("maxBurst", "5"), ("rate", "10"), ("period", "2")]));
    assert_eq!(tat(&mut c, &name), None);
    assert_eq!(five(&redisson_eval(&mut c, TRY_ACQUIRE, n, &["1"]).expect("tryAcquire")), [0, 6, 5, -1, 1]);
}

#[test]
fn the_lua_bodies_replicate_their_effects_and_resp3_decodes_the_same() {
    let s = Server::start();
    let replica = s.replica();
    let mut c = s.conn3();
    let (config, name) = keys_of("replicated");
    redisson_eval(&mut c, TRY_SET_RATE, &[&config], &["1", "1", "60"]).expect("trySetRate");
    let replies: Vec<[i64; 5]> = (0..3)
        .map(|_| five(&redisson_eval(&mut c, TRY_ACQUIRE, &[&config, &name], &["1"]).expect("tryAcquire")))
        .collect();
    assert_eq!(replies, [[0, 2, 1, -1, 60], [0, 2, 0, -1, 120], [1, 2, 0, 60, 120]]);
    let mut p = s.conn();
    wait_replica_for_all(&mut p);
    let mut r = replica.conn();
    assert_eq!(keys(&mut r), keys(&mut p));
    assert_eq!(hgetall(&mut r, &config), hgetall(&mut p, &config));
    assert_eq!((tat(&mut r, &name), pexpiretime(&mut r, &name)), (tat(&mut p, &name), pexpiretime(&mut p, &name)));
}
