//! Part 13, fencing eras (issue 35): what a promotion costs a server holding N fencing
//! counters, when every counter must move to the new era before any grant on its name. A
//! replica of a primary holding N counters is promoted (`REPLICAOF NO ONE`) while a client
//! PINGs it back to back: the table gives how long the promotion's own command took, the
//! module's part of it (the event: the era's records looked up, the walk started), the
//! longest step of the walk and the longest PING wait while it ran, and how long the whole
//! walk took. The last column is what moving every counter at once would stall the server
//! for: one Lua script that `SET`s each of them, on the same server, in the same run. Then a
//! load: `DEBUG RELOAD` of the same server, the module's event and steps from the latency
//! monitor. The primary's history used fencing (it records era 1), so each event also writes
//! the node's era file durably before anything else (`lockmod_fencing_era_file_last_usec`:
//! the write and its two `fsync`s, part of the event's stall).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::report::Table;
use crate::server::{call_s, info, Res, Server};
use crate::{progress, Bench};

/// Moves every counter at once: what an eager move would cost (the stall this part avoids).
const EAGER: &str = "local n = 0 \
    for _, k in ipairs(redis.call('KEYS', 'redisson_lock_token:*')) do \
      redis.call('SET', k, ARGV[1]) n = n + 1 end return n";

/// A client PINGing back to back in a thread: the longest wait is the longest stall it saw.
struct Pinger {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Duration>,
}

impl Pinger {
    fn start(s: &Server) -> Res<Pinger> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut c = s.conn()?;
        let until = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut longest = Duration::ZERO;
            while !until.load(Ordering::SeqCst) {
                let t = Instant::now();
                if redis::cmd("PING").query::<String>(&mut c).is_err() {
                    break;
                }
                longest = longest.max(t.elapsed());
            }
            longest
        });
        Ok(Pinger { stop, thread })
    }

    fn stop(self) -> Res<Duration> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().map_err(|_| "the pinger panicked".to_string())
    }
}

/// Counters written per pipeline.
const BATCH: usize = 10_000;

fn field(c: &mut redis::Connection, name: &str) -> Res<i64> {
    info(c, "lockmod")?.get(name).and_then(|v| v.parse().ok()).ok_or(format!("no {name} in INFO lockmod"))
}

/// The largest sample of `event` in `LATENCY HISTORY` (ms; 0 if none was recorded).
fn latency_max(c: &mut redis::Connection, event: &str) -> Res<i64> {
    let h: Vec<(i64, i64)> =
        redis::cmd("LATENCY").arg("HISTORY").arg(event).query(c).map_err(|e| format!("LATENCY HISTORY: {e}"))?;
    Ok(h.iter().map(|(_, ms)| *ms).max().unwrap_or(0))
}

fn populate(c: &mut redis::Connection, n: usize) -> Res<()> {
    let mut i = 0;
    while i < n {
        let mut pipe = redis::pipe();
        for j in i..(i + BATCH).min(n) {
            pipe.cmd("SET").arg(format!("redisson_lock_token:{{n{j}}}")).arg(j % 1000 + 1).ignore();
        }
        pipe.query::<()>(c).map_err(|e| format!("populate: {e}"))?;
        i += BATCH;
    }
    Ok(())
}

fn wait_synced(r: &Server, deadline: Duration) -> Res<()> {
    let until = Instant::now() + deadline;
    let mut c = r.conn()?;
    loop {
        let i = info(&mut c, "replication")?;
        if i.get("master_link_status").map(String::as_str) == Some("up")
            && i.get("master_sync_in_progress").map(String::as_str) == Some("0")
        {
            return Ok(());
        }
        if Instant::now() > until {
            return Err("part 13: the replica did not sync".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One size: (promotion ms, event ms, longest step ms, longest PING ms, walk ms, eager ms,
/// then after `DEBUG RELOAD`: event ms, longest step ms, reload and walk ms; then the longest
/// PING wait on the idle server for as long as the walk took; the era file's write µs at the
/// promotion, then at the reload).
fn one(b: &Bench, n: usize) -> Res<[f64; 12]> {
    let module = crate::part8::module_path(b)?;
    let p = Server::start_with(&b.binary, Some(&module), "fencing-p", &[])?;
    populate(&mut p.conn()?, n)?;
    // A history that used fencing: its era's record reaches the replica as any key.
    call_s(&mut p.conn()?, &["SET", "lockmod:fencing:era", "1"])?;
    let r =
        Server::start_with(&b.binary, Some(&module), "fencing-r", &["--replicaof", "127.0.0.1", &p.port.to_string()])?;
    wait_synced(&r, Duration::from_secs(600))?;
    let mut c = r.conn()?;
    call_s(&mut c, &["CONFIG", "SET", "latency-monitor-threshold", "1"])?;
    call_s(&mut c, &["LATENCY", "RESET"])?;
    let pinger = Pinger::start(&r)?;
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    call_s(&mut c, &["REPLICAOF", "NO", "ONE"])?;
    let promotion = started.elapsed();
    while field(&mut c, "lockmod_fencing_moving")? != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let walk = started.elapsed();
    let ping = pinger.stop()?;
    // The same wait on the idle server, as long again: the machine's own noise.
    let idle = Pinger::start(&r)?;
    std::thread::sleep(walk);
    let noise = idle.stop()?;
    let moved = field(&mut c, "lockmod_fencing_moved")?;
    if moved != n as i64 {
        return Err(format!("part 13: {moved} counters moved, not {n}"));
    }
    let sample: String = redis::cmd("GET")
        .arg(format!("redisson_lock_token:{{n{}}}", n / 2))
        .query(&mut c)
        .map_err(|e| e.to_string())?;
    if sample != (2i64 << 32).to_string() {
        return Err(format!("part 13: a counter holds {sample} after the walk"));
    }
    let event = latency_max(&mut c, "lockmod-fencing-event")?;
    let step = latency_max(&mut c, "lockmod-fencing-move")?;
    let promotion_file = file_write_usec(&mut c, 1)?;
    // A load (`DEBUG RELOAD`): Redis' own save and load stall the server whatever the module
    // does; the module's part is its event and the walk's steps, as after a promotion.
    call_s(&mut c, &["LATENCY", "RESET"])?;
    let t = Instant::now();
    call_s(&mut c, &["DEBUG", "RELOAD"])?;
    while field(&mut c, "lockmod_fencing_moving")? != 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reload_walk = t.elapsed();
    let reload_event = latency_max(&mut c, "lockmod-fencing-event")?;
    let reload_step = latency_max(&mut c, "lockmod-fencing-move")?;
    let reload_file = file_write_usec(&mut c, 2)?;
    // The eager alternative, on the same server: one script over every counter.
    let t = Instant::now();
    let done: i64 =
        redis::cmd("EVAL").arg(EAGER).arg(0).arg((3i64 << 32).to_string()).query(&mut c).map_err(|e| e.to_string())?;
    let eager = t.elapsed();
    if done != n as i64 {
        return Err(format!("part 13: the eager script moved {done}"));
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Ok([
        ms(promotion),
        event as f64,
        step as f64,
        ms(ping),
        ms(walk),
        ms(eager),
        reload_event as f64,
        reload_step as f64,
        ms(reload_walk),
        ms(noise),
        promotion_file as f64,
        reload_file as f64,
    ])
}

/// The era file's last write (µs), once the server wrote it `writes` times in all.
fn file_write_usec(c: &mut redis::Connection, writes: i64) -> Res<i64> {
    let done = field(c, "lockmod_fencing_era_file_writes")?;
    if done != writes {
        return Err(format!("part 13: the era file was written {done} times, not {writes}"));
    }
    field(c, "lockmod_fencing_era_file_last_usec")
}

pub fn run(b: &mut Bench) -> Res<()> {
    let sizes: &[usize] = if b.quick { &[2_000, 10_000] } else { &[10_000, 100_000, 1_000_000] };
    let mut t = Table::new(&[
        "fencing counters",
        "REPLICAOF NO ONE (ms)",
        "event (ms)",
        "longest walk step (ms)",
        "longest PING wait (ms)",
        "idle as long: longest PING wait (ms)",
        "walk, all moved (ms)",
        "eager: one script moves all (ms)",
        "era file write, in the event (µs)",
    ]);
    let mut load = Table::new(&[
        "fencing counters",
        "event (ms)",
        "longest walk step (ms)",
        "DEBUG RELOAD and walk (ms)",
        "era file write, in the event (µs)",
    ]);
    let mut worst = 0.0f64;
    for &n in sizes {
        progress!("part 13: {n} fencing counters, a promotion then a reload");
        let v = one(b, n)?;
        worst = [v[0], v[1], v[2], v[6], v[7]].into_iter().fold(worst, f64::max);
        t.row(vec![
            n.to_string(),
            format!("{:.1}", v[0]),
            format!("{:.0}", v[1]),
            format!("{:.0}", v[2]),
            format!("{:.1}", v[3]),
            format!("{:.1}", v[9]),
            format!("{:.0}", v[4]),
            format!("{:.0}", v[5]),
            format!("{:.0}", v[10]),
        ]);
        load.row(vec![
            n.to_string(),
            format!("{:.0}", v[6]),
            format!("{:.0}", v[7]),
            format!("{:.0}", v[8]),
            format!("{:.0}", v[11]),
        ]);
    }
    let largest = sizes.last().copied().unwrap_or(0);
    b.report.target(
        &format!("promotion or load stall at {largest} fencing counters (issue 35)"),
        "at most 100 ms",
        format!("{worst:.1} ms (a promotion, an event or a walk step, whichever is longest)"),
        Some(worst <= 100.0),
    );
    let text = "A promotion (or a load) starts a fencing era: every token counter moves to the era's \
        floor before any grant on its name. The promotion's own command includes the module's event \
        (the era's records looked up, the walk started); the walk then moves 1,000 keys per 1 ms tick, \
        the server answering clients between ticks (the longest PING wait is the longest stall a \
        client saw; beside it, the same on the idle server for as long: the shared machine's own \
        noise), and a grant the walk has not reached yet moves its own counter first. `event` and \
        `longest walk step` are the latency monitor's samples (`lockmod-fencing-event`, \
        `lockmod-fencing-move`, threshold 1 ms: 0 means under 1 ms). The last column is the stall of \
        the eager alternative: one Lua script that `SET`s every counter, on the same server. The \
        second table is a load (`DEBUG RELOAD` on the same server afterwards): Redis' own save and \
        load stall the server for as long as they take, with or without the module; the module adds \
        its event and the walk's steps. The primary's history used fencing (it records era 1), so \
        each event first writes the node's era file durably (a temporary file, `fsync`, `rename`, \
        `fsync` of the directory): its own column, in µs, is part of the event's stall (and of the \
        promotion's command).";
    b.report.section("13. Fencing eras: the move after a promotion or a load", text, vec![t, load], vec![]);
    Ok(())
}
