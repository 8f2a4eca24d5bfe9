//! Every path that grants a fencing token, for the tests of issue 35: the module's `TOKEN` on
//! each kind that takes it, and Redisson's `RFencedLock` body sent by `EVALSHA`, run as Lua
//! (`lockmod.redisson-scripts off`) or natively (`native`).

use super::redisson::{field, Scripts};
use super::{ok, Value};

/// `RedissonFencedLock.tryLockInnerAsync`'s body that replies `[-1, token]` (3.19.0 to HEAD).
pub const FENCED_SHA: &str = "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45";

/// The first token of era `n`.
pub const fn era(n: i64) -> i64 {
    n << 32
}

/// How a fenced grant is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    Lock,
    Write,
    Fair,
    /// Redisson's body as Lua.
    LuaPlain,
    /// Redisson's body run natively.
    LuaNative,
}

pub const PATHS: [Path; 5] = [Path::Lock, Path::Write, Path::Fair, Path::LuaPlain, Path::LuaNative];

impl Path {
    /// The lock name this path uses in a test (one per path, so counters are independent).
    pub fn name(self) -> String {
        format!("fz-{self:?}").to_lowercase()
    }

    /// The counter of [`Path::name`].
    pub fn counter(self) -> String {
        super::names::token(&self.name())
    }
}

/// Caches Redisson's fenced body on the server `c` talks to (`EVALSHA` needs it; a restart or
/// a promotion does not bring a replica's script cache).
pub fn load_body(c: &mut redis::Connection) {
    let body = Scripts::load();
    let sha: String = redis::cmd("SCRIPT").arg("LOAD").arg(&body.body(FENCED_SHA).text).query(c).expect("SCRIPT LOAD");
    assert_eq!(sha, FENCED_SHA);
}

/// The token of a grant reply `[-1, token]`.
pub fn token_of(v: &Value) -> i64 {
    match v {
        Value::Array(a) if a.len() == 2 && a[0] == Value::Int(-1) => super::int(&a[1]),
        other => panic!("not a grant: {other:?}"),
    }
}

/// A grant to `owner` on `path`'s lock (a reentry when `owner` holds it: every grant counts),
/// and its token. The Lua paths set `lockmod.redisson-scripts` first, and the native one checks
/// that the body ran natively.
pub fn grant(c: &mut redis::Connection, path: Path, owner: &str) -> i64 {
    let name = path.name();
    let reply = match path {
        Path::Lock => ok(c, &["LOCK.ACQUIRE", &name, owner, "60000", "TOKEN"]),
        Path::Write => ok(c, &["RWLOCK.WLOCK", &name, owner, "60000", "TOKEN"]),
        Path::Fair => ok(c, &["FAIRLOCK.ACQUIRE", &name, owner, "60000", "5000", "TOKEN"]),
        Path::LuaPlain | Path::LuaNative => {
            let native = path == Path::LuaNative;
            ok(c, &["CONFIG", "SET", "lockmod.redisson-scripts", if native { "native" } else { "off" }]);
            let before = field(c, "redisson_native_total");
            let counter = path.counter();
            let r = ok(c, &["EVALSHA", FENCED_SHA, "2", &name, &counter, "60000", owner]);
            let ran = field(c, "redisson_native_total") - before;
            assert_eq!(ran, u64::from(native), "{path:?}: the body ran natively {ran} times");
            r
        }
    };
    token_of(&reply)
}

/// The counter of `path` as the server holds it (None: absent).
pub fn counter(c: &mut redis::Connection, path: Path) -> Option<i64> {
    let v: Option<String> = redis::cmd("GET").arg(path.counter()).query(c).expect("GET");
    v.map(|v| v.parse().expect("an integer counter"))
}

/// The era the server recorded in `lockmod:fencing:era` (outside a cluster), if any.
pub fn recorded_era(c: &mut redis::Connection) -> Option<i64> {
    let v: Option<String> = redis::cmd("GET").arg("lockmod:fencing:era").query(c).expect("GET");
    v.map(|v| v.parse().expect("an integer era"))
}

/// `INFO lockmod`'s `lockmod_fencing_<name>`.
pub fn fencing(c: &mut redis::Connection, name: &str) -> u64 {
    field(c, &format!("fencing_{name}"))
}

/// Waits until no counter is left to move (the walk is over).
pub fn wait_moved(c: &mut redis::Connection) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while fencing(c, "moving") != 0 {
        assert!(std::time::Instant::now() < deadline, "the counters never finished moving");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// `DEBUG RELOAD` on `c`'s server, whose keyspace dumped `before` it, then checks that the
/// reload changed nothing but what a load must change: it starts fencing era 1 (issue 35), so
/// every token counter moves to the era's floor and the era is recorded; a keyspace with no
/// counter gets neither.
pub fn reload_changes_only_the_era(c: &mut redis::Connection, before: &[super::diff::Entry]) {
    ok(c, &["DEBUG", "RELOAD"]);
    wait_moved(c);
    let after = super::diff::dump(c);
    let fenced =
        |e: &super::diff::Entry| e.0.starts_with("redisson_lock_token:") || e.0.starts_with("lockmod:fencing:era");
    let floor = format!("string:Ok(Some(\"{}\"))", era(1));
    for e in after.iter().filter(|e| fenced(e)) {
        let want = if e.0.starts_with("lockmod:") { "string:Ok(Some(\"1\"))" } else { floor.as_str() };
        assert_eq!(e.1, want, "{}", e.0);
    }
    assert_eq!(after.iter().any(fenced), before.iter().any(fenced), "counters and the record, or neither");
    let rest = |d: &[super::diff::Entry]| d.iter().filter(|e| !fenced(e)).cloned().collect::<Vec<_>>();
    assert_eq!(rest(&after), rest(before), "DEBUG RELOAD changed the keyspace");
}
