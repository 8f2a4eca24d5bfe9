//! Part 10e: (a)'s tryAcquire in server instructions per call, counted by callgrind
//! (`crate::callgrind_requests`), which time on shared cores cannot resolve to a few percent:
//! the native `RATELIMITER.ACQUIRE` and Redisson's body run natively on one server with the
//! module, the body as Lua on one without it, all under valgrind. Every side gets the same
//! times (`NOW`, and the body's ARGV), `k` grants a millisecond on a full window (the steady
//! state, where every side removes what leaves the window as it goes), and on a new limiter
//! (10a's granted row, where no grant leaves the window while it is counted).

use redis::Value;

use crate::callgrind_requests as callgrind;
use crate::part10_calls::{set_lua, set_native};
use crate::part7_instr::module_path;
use crate::redisson_rate::{keys, TRY_ACQUIRE};
use crate::redisson_sync::evalsha;
use crate::report::Table;
use crate::server::{call_s, pipeline, Res, Server};
use crate::{progress, strs, Bench};

/// The window (ms): short, so a full one is quick to make under valgrind.
const INTERVAL: i64 = 100;
const T0: i64 = 1_700_000_000_000;

/// The i-th call of a side at `k` grants a millisecond (every side the same times).
fn call(side: usize, k: i64, i: i64) -> Vec<String> {
    let now = (T0 + i / k).to_string();
    match side {
        0 => strs(&["RATELIMITER.ACQUIRE", "rl", "1", "NOW", &now]),
        _ => evalsha(TRY_ACQUIRE, &keys("rl"), &["1", &now, &format!("r{i:015}")]),
    }
}

/// Instructions per counted call (whole request, command path) of one side.
fn side(s: &Server, tag: &str, side: usize, k: i64, full: bool, n: i64) -> Res<callgrind::Dump> {
    let mut c = s.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    let rate = "1000000000000";
    let set = if side == 0 {
        set_native("rl", rate, &INTERVAL.to_string())
    } else {
        set_lua("rl", rate, &INTERVAL.to_string())
    };
    pipeline(&mut c, &[set])?;
    let pre = if full { INTERVAL * k } else { 0 };
    let fill: Vec<Vec<String>> = (0..pre).map(|i| call(side, k, i)).collect();
    for part in fill.chunks(1000) {
        pipeline(&mut c, part)?;
    }
    let counted: Vec<Vec<String>> = (pre..pre + n).map(|i| call(side, k, i)).collect();
    callgrind::count(s, tag, &counted, |v| *v == Value::Nil)
}

pub fn run(b: &mut Bench) -> Res<()> {
    if let Some(why) = callgrind::unavailable(&b.binary) {
        b.report.skip(format!("part 10e, instructions per call: {why}"));
        return Ok(());
    }
    let module = module_path(&b.m)?;
    let tags = ["cg-rl-module", "cg-rl-plain"];
    let servers = match callgrind::start_all(&b.binary, [(Some(&module), tags[0]), (None, tags[1])]) {
        Ok(s) => s,
        Err(why) => {
            b.report.skip(format!("part 10e, instructions per call: the server does not start under valgrind: {why}"));
            return Ok(());
        }
    };
    let r = measure(b, &servers, &tags);
    drop(servers);
    for t in tags {
        callgrind::clean(t);
    }
    r
}

fn measure(b: &mut Bench, servers: &[Server; 2], tags: &[&str; 2]) -> Res<()> {
    let n = b.size(1000, 200) as i64;
    let mut c = servers[0].conn()?;
    call_s(&mut c, &["CONFIG", "SET", "lockmod.redisson-scripts", "native"])?;
    crate::redisson_rate::load(&servers[0])?;
    crate::redisson_rate::load(&servers[1])?;
    let mut t = Table::new(&[
        "window",
        "grants a ms",
        "native instructions (command path)",
        "body run natively (command path)",
        "Lua (command path)",
        "natively / native",
        "Lua / native",
        "native, whole request",
        "body run natively, whole request",
    ]);
    let cases: &[(bool, i64)] =
        if b.quick { &[(true, 5)] } else { &[(true, 1), (true, 5), (true, 50), (true, 150), (false, 150)] };
    for &(full, k) in cases {
        progress!("part 10e: {} window, {k} a ms", if full { "full" } else { "new" });
        let native = side(&servers[0], tags[0], 0, k, full, n)?;
        let body = side(&servers[0], tags[0], 1, k, full, n)?;
        let lua = side(&servers[1], tags[1], 1, k, full, n)?;
        let r = |a: f64, b: f64| format!("{:.3}x", a / b);
        t.row(vec![
            if full { format!("full, {INTERVAL} ms") } else { "new (10a's granted)".into() },
            k.to_string(),
            format!("{:.0}", native.command),
            format!("{:.0}", body.command),
            format!("{:.0}", lua.command),
            r(body.command, native.command),
            r(lua.command, native.command),
            format!("{:.0}", native.total),
            format!("{:.0}", body.total),
        ]);
        b.report.target(
            &format!(
                "rate limiter tryAcquire, {} window at {k} a ms: body run natively / native, instructions",
                if full { "full" } else { "new" }
            ),
            ">= 1x",
            r(body.command, native.command),
            Some(body.command >= native.command),
        );
    }
    let quiet = quiet_calls(b, &servers[0], tags[0])?;
    b.report.section(
        "10e. Redisson's rate limiter: tryAcquire in instructions",
        &format!(
            "Issue 36: the native `RATELIMITER.ACQUIRE` against Redisson's body (`{}`) run natively \
             (`lockmod.redisson-scripts native`, the same server) and as Lua (a server without the module), \
             all three under `valgrind --tool=callgrind` (`crate::callgrind_requests`: the server's work for a \
             request from reading it to writing its reply, and in it the command path, `processCommand`). A \
             limiter of 10^12 a {INTERVAL} ms window; every call takes one permit at a time given to every \
             side alike (`NOW`; the body's ARGV), k calls a millisecond. A full window: {INTERVAL} x k grants \
             made first (uncounted), so each counted call finds the window in its steady state, removing what \
             leaves it as Redisson's body does; a new limiter: 10a's granted row, where nothing leaves the \
             window while it is counted. {n} calls counted per cell. The second table: the one native call \
             after a quiet spell on a long window (filled with one grant a ms, times given with `NOW`), when \
             half of it or all of it has left: what 10c (2) times, counted. Reproduce: `cargo run --release -p \
             lockmod-bench -- --only 10` (10e runs last).",
            &TRY_ACQUIRE[..8]
        ),
        vec![t, quiet],
        vec![],
    );
    Ok(())
}

/// The one native call after a quiet spell on a long window (one grant a ms over the window,
/// then half of it or all of it left), in instructions: what 10c (2) times, without the noise
/// of a shared machine.
fn quiet_calls(b: &mut Bench, s: &Server, tag: &str) -> Res<Table> {
    let mut t = Table::new(&[
        "window",
        "members",
        "the call after half of it left (whole request)",
        "the call after all of it left (whole request)",
    ]);
    let windows: &[i64] = if b.quick { &[60_000] } else { &[60_000, 600_000] };
    for &interval in windows {
        let mut row = vec![format!("{} s", interval / 1000), interval.to_string()];
        for left in [interval / 2, interval + 1] {
            progress!("part 10e: the call after {left} ms on a {interval} ms window");
            let mut c = s.conn()?;
            call_s(&mut c, &["FLUSHALL"])?;
            call_s(&mut c, &["RATELIMITER.TRYSETRATE", "q", "OVERALL", "1000000000000", &interval.to_string()])?;
            for part in (0..interval).collect::<Vec<_>>().chunks(1000) {
                let cmds: Vec<Vec<String>> = part
                    .iter()
                    .map(|i| strs(&["RATELIMITER.ACQUIRE", "q", "16", "NOW", &(T0 + i).to_string()]))
                    .collect();
                pipeline(&mut c, &cmds)?;
            }
            let at = (T0 + interval - 1 + left).to_string();
            let one = [strs(&["RATELIMITER.ACQUIRE", "q", "1", "NOW", &at])];
            let d = callgrind::count(s, tag, &one, |v| *v == Value::Nil)?;
            row.push(format!("{:.0}", d.total));
        }
        t.row(row);
    }
    Ok(t)
}
