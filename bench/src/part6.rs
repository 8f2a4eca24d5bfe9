//! Part 6, the tax on other traffic (issue 17): what loading the module costs commands that
//! touch no lock. `redis-benchmark` runs SET, GET, INCR, HSET, LPUSH, ZADD, PEXPIRE and DEL on
//! random keys against the server without the module, the module's server in one of four
//! states, and a second server without the module (the noise floor: plain against plain), in
//! rotating order; each run reports requests/s and, from `INFO commandstats`, usec per call.

use std::process::Command;
use std::thread::JoinHandle;

use crate::report::Table;
use crate::server::{call_s, command_stat, info_f64, Res, Server};
use crate::stats::{num, ratios, Ratio, Summary};
use crate::{progress, strs, Bench};

/// The commands measured: (commandstats name, redis-benchmark command line).
const COMMANDS: &[(&str, &[&str])] = &[
    ("set", &["SET", "key:__rand_int__", "xxxxxxxxxxxxxxxx"]),
    ("get", &["GET", "key:__rand_int__"]),
    ("incr", &["INCR", "counter:__rand_int__"]),
    ("hset", &["HSET", "hash:__rand_int__", "field", "xxxxxxxx"]),
    ("lpush", &["LPUSH", "list:__rand_int__", "xxxxxxxx"]),
    ("zadd", &["ZADD", "zset:__rand_int__", "1", "member"]),
    ("pexpire", &["PEXPIRE", "key:__rand_int__", "600000"]),
    ("del", &["DEL", "key:__rand_int__"]),
];

/// What runs on the module's server while the traffic is measured.
#[derive(Clone, Copy, PartialEq)]
enum State {
    Idle,
    Indexed,
    Parked,
    Fair,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Idle => "loaded, idle",
            State::Indexed => "read holds indexed (8 locks x 100 holds)",
            State::Parked => "16 clients parked with BLOCK on 8 held locks",
            State::Fair => "4 fair queues of 50 waiters, 2 parked on each",
        }
    }
}

/// Requests per second `redis-benchmark` reports for one command line.
fn rb(s: &Server, n: usize, args: &[&str]) -> Res<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &s.port.to_string(), "-c", "50", "-P", "16", "-r", "100000"])
        .args(["-n", &n.to_string(), "--csv"])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-benchmark (scripts/install-deps.sh installs redis-tools): {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let rps = text
        .lines()
        .filter(|l| !l.starts_with("\"test\""))
        .filter_map(|l| l.split("\",\"").nth(1))
        .filter_map(|v| v.trim_matches('"').parse::<f64>().ok())
        .next_back();
    rps.filter(|r| *r > 0.0).ok_or_else(|| format!("redis-benchmark {}: no rate in {text:?}", args.join(" ")))
}

/// One run: (usec per call, requests/s).
fn run_one(s: &Server, n: usize, stat: &str, cmd: &[&str]) -> Res<(f64, f64)> {
    let mut c = s.conn()?;
    call_s(&mut c, &["CONFIG", "RESETSTAT"])?;
    let rps = rb(s, n, cmd)?;
    let (calls, usec) = command_stat(&mut c, stat)?;
    if calls < n as u64 {
        return Err(format!("commandstats counted {calls} {stat} calls, {n} were sent"));
    }
    Ok((usec as f64 / calls as f64, rps))
}

/// Clients parked on the module's server for a state, released (killed) by [`Parked::end`].
struct Parked {
    ids: Vec<i64>,
    threads: Vec<JoinHandle<()>>,
}

impl Parked {
    fn park(s: &Server, args: &[String]) -> Res<(i64, JoinHandle<()>)> {
        let mut c = s.conn()?;
        let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c).map_err(|e| e.to_string())?;
        let args = args.to_vec();
        Ok((id, std::thread::spawn(move || drop(crate::server::call(&mut c, &args)))))
    }

    fn end(self, s: &Server) -> Res<()> {
        let mut c = s.conn()?;
        for id in &self.ids {
            let _ = call_s(&mut c, &["CLIENT", "KILL", "ID", &id.to_string()]);
        }
        for t in self.threads {
            let _ = t.join();
        }
        call_s(&mut c, &["FLUSHALL"])?;
        Ok(())
    }
}

/// Sets `state` up on the module's server (flushed first).
fn enter(s: &Server, state: State) -> Res<Parked> {
    let mut c = s.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    let mut parked = Parked { ids: vec![], threads: vec![] };
    let lease = "600000";
    match state {
        State::Idle => {}
        State::Indexed => {
            for l in 0..8 {
                let key = format!("tax:rw:{l}");
                for o in 0..100 {
                    call_s(&mut c, &["RWLOCK.RLOCK", &key, &format!("reader-{o}"), lease])?;
                }
                call_s(&mut c, &["RWLOCK.UNLOCK", &key, "reader-0", "READ", lease])?;
            }
            if info_f64(&mut c, "lockmod", "lockmod_indexed_read_holds")? <= 0.0 {
                return Err("part 6: the read-hold index was not built".into());
            }
        }
        State::Parked => {
            for l in 0..8 {
                let key = format!("tax:lock:{l}");
                call_s(&mut c, &["LOCK.ACQUIRE", &key, "holder", lease])?;
                for w in 0..2 {
                    let (id, t) =
                        Parked::park(s, &strs(&["LOCK.ACQUIRE", &key, &format!("w{w}"), lease, "BLOCK", "0"]))?;
                    parked.ids.push(id);
                    parked.threads.push(t);
                }
            }
        }
        State::Fair => {
            for l in 0..4 {
                let key = format!("tax:fair:{l}");
                call_s(&mut c, &["FAIRLOCK.ACQUIRE", &key, "holder", lease, lease])?;
                for w in 0..50 {
                    call_s(&mut c, &["FAIRLOCK.ACQUIRE", &key, &format!("queued-{w}"), lease, lease])?;
                }
                for w in 0..2 {
                    let args = strs(&["FAIRLOCK.ACQUIRE", &key, &format!("parked-{w}"), lease, lease, "BLOCK", "0"]);
                    let (id, t) = Parked::park(s, &args)?;
                    parked.ids.push(id);
                    parked.threads.push(t);
                }
            }
        }
    }
    let want = parked.ids.len() as f64;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while info_f64(&mut c, "clients", "blocked_clients")? < want {
        if std::time::Instant::now() > deadline {
            return Err(format!("part 6: {want} clients did not park"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(parked)
}

pub fn run(b: &mut Bench) -> Res<()> {
    let rounds = b.rounds(4);
    let n = b.size(40_000, 3_000);
    if !b.has("LOCK.ACQUIRE") || !b.has("FAIRLOCK.ACQUIRE") || !b.has("RWLOCK.RLOCK") {
        return Err("part 6 needs LOCK.*, RWLOCK.* and FAIRLOCK.*".into());
    }
    let p2 = Server::start(&b.binary, None, "plain2")?;
    for s in [&b.p, &p2] {
        call_s(&mut s.conn()?, &["FLUSHALL"])?;
    }
    let mut t = Table::new(&[
        "module's server",
        "command",
        "usec per call, no module",
        "module / no module, usec",
        "noise: no module / no module, usec",
        "requests/s, no module",
        "module / no module, req/s",
        "noise: no module / no module, req/s",
    ]);
    let (mut all_noise_u, mut all_noise_r) = (vec![], vec![]);
    for state in [State::Idle, State::Indexed, State::Parked, State::Fair] {
        let parked = enter(&b.m, state)?;
        let (mut worst_u, mut worst_r) = (Summary::default(), Summary { median: f64::INFINITY, ..Summary::default() });
        let (mut worst_u_cmd, mut worst_r_cmd) = ("", "");
        for &(stat, cmd) in COMMANDS {
            let (mut pu, mut mu, mut qu, mut pr, mut mr, mut qr) = (vec![], vec![], vec![], vec![], vec![], vec![]);
            for r in 0..rounds {
                progress!("part 6: {} / {stat}, round {}/{rounds}", state.name(), r + 1);
                // Rotate the order so warm-up and drift favour no server.
                for k in 0..3 {
                    match (r + k) % 3 {
                        0 => {
                            let (u, q) = run_one(&b.p, n, stat, cmd)?;
                            pu.push(u);
                            pr.push(q);
                        }
                        1 => {
                            let (u, q) = run_one(&b.m, n, stat, cmd)?;
                            mu.push(u);
                            mr.push(q);
                        }
                        _ => {
                            let (u, q) = run_one(&p2, n, stat, cmd)?;
                            qu.push(u);
                            qr.push(q);
                        }
                    }
                }
            }
            let (ru, rr) = (Summary::of(&ratios(&mu, &pu)), Summary::of(&ratios(&mr, &pr)));
            let (nu, nr) = (ratios(&qu, &pu), ratios(&qr, &pr));
            all_noise_u.extend(&nu);
            all_noise_r.extend(&nr);
            if ru.median > worst_u.median || worst_u_cmd.is_empty() {
                (worst_u, worst_u_cmd) = (ru, stat);
            }
            if rr.median < worst_r.median {
                (worst_r, worst_r_cmd) = (rr, stat);
            }
            t.row(vec![
                state.name().into(),
                stat.to_uppercase(),
                num(Summary::of(&pu).median),
                format!("{}", Ratio(ru)),
                format!("{}", Ratio(Summary::of(&nu))),
                num(Summary::of(&pr).median),
                format!("{}", Ratio(rr)),
                format!("{}", Ratio(Summary::of(&nr))),
            ]);
        }
        parked.end(&b.m)?;
        b.report.target(
            &format!("tax, {}: usec per call, module / no module, worst command", state.name()),
            "<= 1.02x",
            format!("{} ({worst_u_cmd})", Ratio(worst_u)),
            Some(worst_u.median <= 1.02),
        );
        b.report.target(
            &format!("tax, {}: requests/s, module / no module, worst command", state.name()),
            ">= 0.98x",
            format!("{} ({worst_r_cmd})", Ratio(worst_r)),
            Some(worst_r.median >= 0.98),
        );
    }
    let (nu, nr) = (Summary::of(&all_noise_u), Summary::of(&all_noise_r));
    b.report.target(
        "tax noise floor: usec, no module / no module (all runs)",
        "stated",
        format!("{}", Ratio(nu)),
        None,
    );
    b.report.target(
        "tax noise floor: req/s, no module / no module (all runs)",
        "stated",
        format!("{}", Ratio(nr)),
        None,
    );
    b.report.section(
        "6. The tax on other traffic",
        &format!(
            "Commands on keys that are no lock's, on the module's server against the server without it: \
             `redis-benchmark -c 50 -P 16 -r 100000 -n {n}` per command (the command lines in \
             `bench/src/part6.rs`), usec per call from `INFO commandstats` (reset before each run) and the \
             requests/s redis-benchmark reports. Each round runs the server without the module, the module's \
             server, and a second server without the module in rotating order, {rounds} rounds per command and \
             state; the ratios are per round (median, min-max). The last two columns divide the two servers \
             without the module: the noise floor of this harness on this machine (over all runs: usec {}, \
             req/s {}). The module's server is flushed between states; the parked and fair states keep their \
             clients parked (`BLOCK 0`) while the traffic runs.",
            Ratio(nu),
            Ratio(nr)
        ),
        vec![t],
        vec![],
    );
    Ok(())
}
