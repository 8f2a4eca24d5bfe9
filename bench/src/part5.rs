//! Part 5, memory: `INFO memory` used_memory per held lock of each kind, per queued fair waiter and
//! per parked `BLOCK` client, with the module's own allocations (`INFO lockmod`
//! lockmod_memory_bytes) beside them; then rounds of park / timeout / disconnect must not grow it.

use std::time::{Duration, Instant};

use crate::report::Table;
use crate::server::{call_s, info_f64, pipeline, Res, Server};
use crate::stats::num;
use crate::strs;
use crate::workloads::{Expect, LEASE, OTHER, WAIT};
use crate::{progress, Bench};

/// A lock kind's acquire of a fresh key.
type Build = fn(&str) -> Vec<String>;

/// (used_memory, lockmod_memory_bytes) now, read on a fresh connection.
fn mem(s: &Server) -> Res<(f64, f64)> {
    let mut c = s.conn()?;
    let used = info_f64(&mut c, "memory", "used_memory")?;
    let module = if s.module { info_f64(&mut c, "lockmod", "lockmod_memory_bytes")? } else { 0.0 };
    Ok((used, module))
}

fn blocked_now(c: &mut redis::Connection) -> Res<f64> {
    info_f64(c, "lockmod", "lockmod_blocked_now")
}

/// Waits until `INFO lockmod` counts `n` parked clients.
fn wait_parked(c: &mut redis::Connection, n: usize) -> Res<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while blocked_now(c)? as usize != n {
        if Instant::now() > deadline {
            return Err(format!("expected {n} parked clients, INFO lockmod says {}", blocked_now(c)?));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Runs `cmds` (checked) and returns bytes per command of used_memory and of module memory.
fn per_item(s: &Server, setup: &[Vec<String>], cmds: &[Vec<String>], expect: Expect) -> Res<(f64, f64)> {
    let mut c = s.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    pipeline(&mut c, setup)?;
    let before = mem(s)?;
    for b in cmds.chunks(1000) {
        for (a, v) in b.iter().zip(pipeline(&mut c, b)?) {
            if !expect.check(&v) {
                return Err(format!("{}: expected {expect:?}, got {v:?}", a.join(" ")));
            }
        }
    }
    let after = mem(s)?;
    let n = cmds.len() as f64;
    Ok(((after.0 - before.0) / n, (after.1 - before.1) / n))
}

/// Parks `n` clients on a held lock with `BLOCK ms`; returns the connections.
fn park(s: &Server, key: &str, n: usize, ms: u64, tag: &str) -> Res<Vec<redis::Connection>> {
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut c = s.conn()?;
        let cmd = redis::cmd("LOCK.ACQUIRE")
            .arg(key)
            .arg(format!("{tag}-{i}"))
            .arg(LEASE)
            .arg("BLOCK")
            .arg(ms)
            .get_packed_command();
        c.send_packed_command(&cmd).map_err(|e| e.to_string())?;
        conns.push(c);
    }
    Ok(conns)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let n = b.size(10_000, 500);
    let mut t = Table::new(&["item", "used_memory bytes each", "module allocation bytes each"]);
    #[rustfmt::skip]
    let locks: [(&str, &str, Build); 4] = [
        ("held LOCK", "LOCK.ACQUIRE", |k| strs(&["LOCK.ACQUIRE", k, OTHER, LEASE])),
        ("held RWLOCK read", "RWLOCK.RLOCK", |k| strs(&["RWLOCK.RLOCK", k, OTHER, LEASE])),
        ("held RWLOCK write", "RWLOCK.WLOCK", |k| strs(&["RWLOCK.WLOCK", k, OTHER, LEASE])),
        ("held FAIRLOCK", "FAIRLOCK.ACQUIRE", |k| strs(&["FAIRLOCK.ACQUIRE", k, OTHER, LEASE, WAIT])),
    ];
    let mut ran = 0;
    for (name, cmd, f) in locks {
        if !b.available(&format!("part 5 {name}"), cmd, &[]) {
            t.row(vec![name.into(), "n/a".into(), "n/a".into()]);
            continue;
        }
        progress!("part 5: {n} x {name}");
        let cmds: Vec<Vec<String>> = (0..n).map(|i| f(&format!("mem:{i}"))).collect();
        let (u, m) = per_item(&b.m, &[], &cmds, Expect::Nil)?;
        t.row(vec![format!("{name} ({n} locks)"), num(u), num(m)]);
        b.report.target(
            &format!("{name}: bytes per lock (used_memory / module's own)"),
            "stated",
            format!("{} / {}", num(u), num(m)),
            None,
        );
        ran += 1;
    }
    progress!("part 5: {n} x SET NX PX (server without the module)");
    let cmds: Vec<Vec<String>> =
        (0..n).map(|i| strs(&["SET", &format!("mem:{i}"), OTHER, "NX", "PX", LEASE])).collect();
    let (u, _) = per_item(&b.p, &[], &cmds, Expect::Ok)?;
    t.row(vec![format!("SET NX PX, no module ({n} keys)"), num(u), "-".into()]);

    if b.available("part 5 fair waiters", "FAIRLOCK.ACQUIRE", &[]) {
        progress!("part 5: {n} queued fair waiters");
        let setup = vec![strs(&["FAIRLOCK.ACQUIRE", "memq", OTHER, LEASE, "600000"])];
        let cmds: Vec<Vec<String>> =
            (0..n).map(|i| strs(&["FAIRLOCK.ACQUIRE", "memq", &format!("w-{i}"), LEASE, "600000"])).collect();
        let (u, m) = per_item(&b.m, &setup, &cmds, Expect::PositiveInt)?;
        t.row(vec![format!("queued FAIRLOCK waiter ({n} waiters)"), num(u), num(m)]);
        b.report.target(
            "FAIRLOCK: bytes per queued waiter (used_memory / module's own)",
            "stated",
            format!("{} / {}", num(u), num(m)),
            None,
        );
    }

    // Parked BLOCK clients: the connections are opened first, so their own cost is not counted.
    let parked = b.size(1000, 50);
    progress!("part 5: {parked} parked BLOCK clients");
    let mut c = b.m.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    call_s(&mut c, &["LOCK.ACQUIRE", "memb", OTHER, "600000"])?;
    let mut idle = Vec::with_capacity(parked);
    for _ in 0..parked {
        let mut x = b.m.conn()?;
        call_s(&mut x, &["PING"])?;
        idle.push(x);
    }
    let before = mem(&b.m)?;
    for (i, x) in idle.iter_mut().enumerate() {
        let cmd = redis::cmd("LOCK.ACQUIRE")
            .arg("memb")
            .arg(format!("p-{i}"))
            .arg(LEASE)
            .arg("BLOCK")
            .arg(600_000)
            .get_packed_command();
        x.send_packed_command(&cmd).map_err(|e| e.to_string())?;
    }
    wait_parked(&mut c, parked)?;
    let after = mem(&b.m)?;
    let (u, m) = ((after.0 - before.0) / parked as f64, (after.1 - before.1) / parked as f64);
    t.row(vec![format!("parked BLOCK client ({parked} clients)"), num(u), num(m)]);
    b.report.target(
        "bytes per parked BLOCK client (used_memory / module's own)",
        "stated",
        format!("{} / {}", num(u), num(m)),
        None,
    );
    drop(idle);
    wait_parked(&mut c, 0)?;

    // Rounds of park / timeout / disconnect: the module's memory must come back each time.
    let rounds = 10;
    let per = b.size(200, 20);
    let mut seen = vec![];
    for r in 0..rounds {
        progress!("part 5: park/timeout/disconnect round {}/{rounds}", r + 1);
        // Counted by the parked total, not the parked-now gauge: the 100 ms timeouts may fire
        // before the last client of the round has parked on a busy machine.
        let total = info_f64(&mut c, "lockmod", "lockmod_blocked_total")?;
        let leaving = park(&b.m, "memb", per, 600_000, &format!("d{r}"))?;
        let timing = park(&b.m, "memb", per, 100, &format!("t{r}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while info_f64(&mut c, "lockmod", "lockmod_blocked_total")? < total + (2 * per) as f64 {
            if Instant::now() > deadline {
                return Err(format!("round {}: {} clients never parked", r + 1, 2 * per));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(leaving);
        wait_parked(&mut c, 0)?;
        drop(timing);
        seen.push(mem(&b.m)?);
    }
    let first = seen.first().copied().unwrap_or_default();
    let last = seen.last().copied().unwrap_or_default();
    let growth = last.1 - first.1;
    t.row(vec![
        format!("module memory after round 1 / round {rounds} of {per} timeouts + {per} disconnects"),
        format!("{} / {}", num(first.0), num(last.0)),
        format!("{} / {}", num(first.1), num(last.1)),
    ]);
    b.report.target(
        &format!("module memory growth over rounds 1-{rounds} of park/timeout/disconnect"),
        "0 bytes",
        format!("{} bytes", num(growth)),
        Some(growth <= 0.0),
    );
    if ran == 0 {
        return Err("part 5 measured no lock kind".into());
    }
    b.report.section(
        "5. Memory",
        &format!(
            "Deltas of `INFO memory` used_memory and of `INFO lockmod` lockmod_memory_bytes (the module's own \
             allocations, counted by its allocator) around {n} held locks of each kind on fresh keys, {n} \
             waiters queued on one fair lock, and {parked} clients parked with `BLOCK` on one held lock (their \
             connections opened before the first reading, so only the parking is counted). Then {rounds} rounds \
             of {per} clients parked with `BLOCK 100` timing out and {per} parked clients disconnecting."
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
