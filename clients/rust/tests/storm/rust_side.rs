//! The storm's Rust side: tasks sharing two `Lock` objects (one fenced) of one `LockClient`,
//! the critical section every side runs (two Lua scripts, the same for all), and a `tracing`
//! subscriber that counts what the library logs about settling.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis_lockmod_client::{Error, Lock, LockGuard, Unlocked};
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata};

use super::tally::Tally;

/// The keys of the critical section: the holder, the highest fencing token seen inside, the
/// violation count and their log.
pub const KEYS: [&str; 4] = ["storm:holder", "storm:fence", "storm:violations", "storm:log"];

/// Entering the critical section (ARGV: who, its fencing token or ""): claims the holder key
/// (`SET NX`: held already means two holders at once), and checks that the token is above every
/// token seen inside before (tokens grow with grants, so a lower one entered after a later
/// grant; tokens are decimal numbers without leading zeros). A violation is counted and logged; returns 1, or 0 on a violation.
pub const ENTER: &str = r"
local bad = {}
if not redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  bad[#bad + 1] = 'held by ' .. tostring(redis.call('GET', KEYS[1]))
end
if ARGV[2] ~= '' then
  -- Compared as decimal strings: a token may pass 2^53, past which Lua's numbers round.
  local seen = redis.call('GET', KEYS[2]) or '0'
  local t = ARGV[2]
  if #t < #seen or (#t == #seen and t <= seen) then
    bad[#bad + 1] = 'token ' .. t .. ' after ' .. seen
  else
    redis.call('SET', KEYS[2], t)
  end
end
if #bad > 0 then
  redis.call('INCR', KEYS[3])
  redis.call('RPUSH', KEYS[4], ARGV[1] .. ': ' .. table.concat(bad, '; '))
  return 0
end
return 1
";

/// Leaving it: deletes the holder key only if it is still the caller's.
pub const LEAVE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
";

async fn script(conn: &mut MultiplexedConnection, body: &str, keys: &[&str], args: &[&str]) -> Result<i64, String> {
    redis::cmd("EVAL").arg(body).arg(keys.len()).arg(keys).arg(args).query_async(conn).await.map_err(|e| e.to_string())
}

/// The critical section of `me` holding with `token`: enter, a short random sleep, leave.
pub async fn critical_section(
    conn: &mut MultiplexedConnection,
    me: &str,
    token: Option<u64>,
    rng: &mut StdRng,
) -> Result<(), String> {
    let token = token.map(|t| t.to_string()).unwrap_or_default();
    script(conn, ENTER, &KEYS, &[me, &token]).await?;
    tokio::time::sleep(Duration::from_micros(rng.gen_range(1_000..4_000))).await;
    script(conn, LEAVE, &KEYS[..1], &[me]).await?;
    Ok(())
}

/// How long an acquire waits: `None` without limit (`acquire()`), `ZERO` tries once.
fn pick_wait(rng: &mut StdRng) -> Option<Duration> {
    let ms = match rng.gen_range(0..10) {
        0 => 0,
        1 => return None,
        2..=5 => rng.gen_range(5..200),
        _ => rng.gen_range(200..1500),
    };
    Some(Duration::from_millis(ms))
}

async fn acquire(lock: Arc<Lock>, wait: Option<Duration>) -> redis_lockmod_client::Result<Option<LockGuard>> {
    match wait {
        None => lock.acquire().await.map(Some),
        Some(d) => lock.try_acquire(d).await,
    }
}

enum Outcome {
    Done(redis_lockmod_client::Result<Option<LockGuard>>),
    Cancelled,
}

/// One acquire, cancelled a quarter of the time at a random moment: half of those by dropping
/// the future (`tokio::time::timeout`), half by aborting the task that runs it.
async fn attempt(lock: &Arc<Lock>, rng: &mut StdRng) -> Result<Outcome, String> {
    let fut = acquire(lock.clone(), pick_wait(rng));
    if !rng.gen_bool(0.25) {
        return Ok(Outcome::Done(fut.await));
    }
    let after = Duration::from_millis(rng.gen_range(1..300));
    if rng.gen_bool(0.5) {
        return Ok(tokio::time::timeout(after, fut).await.map_or(Outcome::Cancelled, Outcome::Done));
    }
    let mut task = tokio::spawn(fut);
    tokio::select! {
        done = &mut task => done.map(Outcome::Done).map_err(|e| format!("the acquire task: {e}")),
        _ = tokio::time::sleep(after) => {
            task.abort();
            match task.await {
                Ok(done) => Ok(Outcome::Done(done)),
                Err(e) if e.is_cancelled() => Ok(Outcome::Cancelled),
                Err(e) => Err(format!("the acquire task: {e}")),
            }
        }
    }
}

fn is_unblocked(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.code() == Some("UNBLOCKED"))
}

/// A wait killed, settled as not granted, with no time left to wait again (documented).
fn is_lost_not_granted(e: &Error) -> bool {
    matches!(e, Error::Redis(r) if r.kind() == redis::ErrorKind::Io && r.to_string().contains("settled: not granted"))
}

/// One Rust worker: acquires until `end`, runs the critical section, unlocks (a tenth of the
/// time it drops the guard instead: released in the background, before its next request).
pub async fn worker(
    i: usize,
    lock: Arc<Lock>,
    mut conn: MultiplexedConnection,
    end: Instant,
    tally: Arc<Tally>,
) -> Result<(), String> {
    let mut rng = StdRng::from_entropy();
    let mut n = 0;
    while Instant::now() < end {
        n += 1;
        let guard = match attempt(&lock, &mut rng).await.map_err(|e| format!("rust worker {i}: {e}"))? {
            Outcome::Cancelled => {
                tally.add("rust", "cancels", 1);
                continue;
            }
            Outcome::Done(Ok(Some(g))) => g,
            Outcome::Done(Ok(None)) => {
                tally.add("rust", "timeouts", 1);
                continue;
            }
            Outcome::Done(Err(e)) if is_unblocked(&e) => {
                tally.add("rust", "unblocked", 1);
                continue;
            }
            Outcome::Done(Err(e)) if is_lost_not_granted(&e) => {
                tally.add("rust", "lost", 1);
                continue;
            }
            Outcome::Done(Err(e)) => return Err(format!("rust worker {i}: acquire: {e:?}")),
        };
        tally.add("rust", "grants", 1);
        tally.add("rust", "fenced", u64::from(guard.token().is_some()));
        let me = format!("rust:{i}:{n}:{}", guard.owner());
        critical_section(&mut conn, &me, guard.token(), &mut rng).await.map_err(|e| format!("rust worker {i}: {e}"))?;
        if rng.gen_bool(0.1) {
            drop(guard);
            tally.add("rust", "drops", 1);
        } else {
            match guard.unlock().await {
                Ok(Unlocked::Last) => {}
                other => return Err(format!("rust worker {i}: unlock: {other:?}")),
            }
        }
    }
    Ok(())
}

/// Counts the library's `tracing` events: settles of lost replies (and those granted after
/// all), grants of cancelled waits given back; any other warning is kept, as a failure.
pub struct SettleCounter {
    pub tally: Arc<Tally>,
    pub unexpected: Arc<Mutex<Vec<String>>>,
}

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

/// What a warning of the library may say in a storm: a lost reply settled, a wait lost and
/// waited again, an unlock's lost reply sent again with its latch.
const EXPECTED_WARNINGS: [&str; 3] = ["settled with", "waiting again", "sending the same LATCH request again"];

impl tracing::Subscriber for SettleCounter {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.is_event() && *metadata.level() <= Level::INFO
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        let text = m.0;
        if text.contains("settled with") {
            self.tally.add("rust", "settles", 1);
            self.tally.add("rust", "settled_granted", u64::from(text.ends_with(": granted")));
        } else if text.contains("granted to a cancelled acquire: giving it back") {
            self.tally.add("rust", "cancel_give_backs", 1);
        }
        let expected = EXPECTED_WARNINGS.iter().any(|w| text.contains(w));
        if *event.metadata().level() <= Level::WARN && !expected {
            self.unexpected.lock().unwrap_or_else(|e| e.into_inner()).push(text);
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
