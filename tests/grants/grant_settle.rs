//! A grant that is given back is never seen (issue 34, part 1). A parked client `w` is
//! granted, and before Redis writes the reply it is killed or unblocked with an error, while
//! `x` waits behind it. From the moment the kill or unblock has run, every command must see
//! the grant given back and `x` served: the module's own reads (`*.HOLDS`, `SYNC.INFO`) and
//! the keyspace, inside the same transaction, on the same connection right after, on another
//! connection, and on `w`'s own connection once it was told `UNBLOCKED`. The libraries'
//! settle of a lost reply (`CLIENT KILL ID`, then `*.HOLDS`) must never read "granted" for a
//! grant that then goes to `x`: two holders. Each way is run `GRANT_SETTLE_ROUNDS` times (20)
//! per kind; every round that saw a grant that was given back is counted, and the test fails
//! with the counts.

use crate::common;

use std::time::Duration;

use common::answers::{Answer, Pinged};
use common::parked::{blocked_clients, lockmod_field, wait_blocked};
use common::settle_kinds::{kind, show, strs, Kind};
use common::*;

/// How `w` loses its grant's reply.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Way {
    /// `MULTI`, release, `CLIENT KILL ID w`, reads, `EXEC`, then the reads on the same
    /// connection and on another one.
    KillInMulti,
    /// `MULTI`, release, `CLIENT UNBLOCK w ERROR`, `EXEC`; `w`, told `UNBLOCKED`, reads at once.
    Unblocked,
    /// The release from one connection and, at the same moment, `CLIENT KILL ID w` and the
    /// reads from another: the libraries' settle. The kill may come before `w`'s reply is
    /// written (then `w` holds nothing) or after (then `w` holds its grant and `x` waits).
    Settle,
}

const WAYS: [Way; 3] = [Way::KillInMulti, Way::Unblocked, Way::Settle];

fn rounds() -> usize {
    std::env::var("GRANT_SETTLE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20)
}

struct Env {
    s: Server,
    sub: Subscriber,
    /// The holder's (and the admin's) connection, and an observer's.
    c: redis::Connection,
    o: redis::Connection,
}

fn cmd(args: &[String]) -> redis::Cmd {
    let mut c = redis::cmd(&args[0]);
    c.arg(&args[1..]);
    c
}

fn run(c: &mut redis::Connection, args: &[String]) -> Value {
    ok(c, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// `kind`'s reads on `c`, as its line.
fn read_line(kind: &Kind, c: &mut redis::Connection, key: &str) -> String {
    let mut p = redis::pipe();
    for r in (kind.reads)(key) {
        p.add_command(cmd(&r));
    }
    let v: Vec<Value> = p.query(c).expect("the reads");
    (kind.line)(&v)
}

fn with_block(mut args: Vec<String>) -> Vec<String> {
    args.extend(strs(&["BLOCK", "0"]));
    args
}

/// Holds `key` and parks `w`, then `x` behind it. Returns the holder's release.
fn park(env: &mut Env, kind: &Kind, key: &str) -> (Vec<String>, Pinged, Pinged) {
    let release = (kind.hold)(&mut env.c, key);
    let mut w = Pinged::connect(&env.s);
    w.send(&with_block((kind.acquire_w)(key)).iter().map(String::as_str).collect::<Vec<_>>());
    wait_blocked(&mut env.c, 1);
    let mut x = Pinged::connect(&env.s);
    x.send(&with_block((kind.acquire_x)(key)).iter().map(String::as_str).collect::<Vec<_>>());
    wait_blocked(&mut env.c, 2);
    env.sub.take();
    (release, w, x)
}

/// Whether `w`'s grant was dropped (given back) or delivered (only `Settle` may deliver it).
#[derive(Debug, PartialEq)]
enum Outcome {
    Dropped,
    Delivered,
}

/// One round on `key`; every read that saw the grant given back goes into `seen`: where it
/// read, and what.
fn round(env: &mut Env, kind: &Kind, key: &str, way: Way, seen: &mut Vec<(&'static str, String)>) -> Outcome {
    let (release, mut w, mut x) = park(env, kind, key);
    let given_back = lockmod_field(&mut env.c, "grants_given_back");
    let id = w.id.to_string();
    let mut check = |what: &'static str, got: String, want: &str| {
        if got != want {
            seen.push((what, format!("{key}: {what} read `{got}`, wanted `{want}`")));
        }
    };
    let reads = (kind.reads)(key);
    let outcome = match way {
        Way::KillInMulti => {
            let mut p = redis::pipe();
            p.cmd("MULTI").add_command(cmd(&release)).cmd("CLIENT").arg(&["KILL", "ID", &id]);
            for r in &reads {
                p.add_command(cmd(r));
            }
            p.cmd("EXEC");
            for r in &reads {
                p.add_command(cmd(r));
            }
            let v: Vec<Value> = p.query(&mut env.c).expect("the holder's transaction");
            let exec = &v[3 + reads.len()];
            let Value::Array(inner) = exec else { panic!("EXEC replied {exec:?}") };
            check("inside the transaction", (kind.line)(&inner[2..]), kind.x_holds);
            check("right after EXEC", (kind.line)(&v[4 + reads.len()..]), kind.x_holds);
            check("from another connection", read_line(kind, &mut env.o, key), kind.x_holds);
            assert_eq!(w.answer(), Answer::Gone, "{key}: killed");
            Outcome::Dropped
        }
        Way::Unblocked => {
            let unblock = strs(&["CLIENT", "UNBLOCK", &id, "ERROR"]);
            let _: Value = redis::pipe()
                .atomic()
                .add_command(cmd(&release))
                .add_command(cmd(&unblock))
                .query(&mut env.c)
                .expect("the holder's transaction");
            let told = w.answer();
            assert!(matches!(&told, Answer::Error(e) if e.starts_with("UNBLOCKED")), "{key}: told {told:?}");
            check("by the waiter told UNBLOCKED", read_line(kind, &mut w.conn, key), kind.x_holds);
            Outcome::Dropped
        }
        Way::Settle => {
            env.c.send_packed_command(&cmd(&release).get_packed_command()).expect("send the release");
            let mut settle = redis::cmd("CLIENT").arg(&["KILL", "ID", &id]).get_packed_command();
            reads.iter().for_each(|r| settle.extend(cmd(r).get_packed_command()));
            env.o.send_packed_command(&settle).expect("send the settle");
            env.c.recv_response().expect("the release's reply");
            env.o.recv_response().expect("the kill's reply");
            let replies: Vec<Value> = reads.iter().map(|_| env.o.recv_response().expect("a read")).collect();
            let settled = (kind.line)(&replies);
            match w.answer_or_gone() {
                Answer::Gone => {
                    check("by the settle", settled, kind.x_holds);
                    Outcome::Dropped
                }
                Answer::Reply(v) if (kind.granted)(&v) => {
                    // Told granted, and settled as held: it holds the grant, and `x` waits
                    // until it is released.
                    check("by the settle of a delivered grant", settled, kind.w_holds);
                    if kind.takes {
                        assert_eq!(blocked_clients(&mut env.c), 1, "{key}: x was served while w holds");
                    }
                    check("before w's release", read_line(kind, &mut env.o, key), kind.w_holds);
                    run(&mut env.c, &(kind.release_w)(key, &v));
                    Outcome::Delivered
                }
                other => panic!("{key}: killed, answered {other:?}"),
            }
        }
    };
    // `x` is served (from the give-back, or from `w`'s release), then releases.
    let Answer::Reply(xv) = x.answer() else { panic!("{key}: x was not answered") };
    assert!((kind.granted)(&xv), "{key}: x answered {xv:?}");
    let mut published = (kind.on_release)(key);
    published.extend((kind.on_give_back)(key));
    assert_eq!(env.sub.take(), published, "{key}: {way:?} {outcome:?}");
    let back = i64::from(outcome == Outcome::Dropped && kind.takes);
    assert_eq!(lockmod_field(&mut env.c, "grants_given_back"), given_back + back, "{key}");
    assert_eq!(read_line(kind, &mut env.o, key), kind.x_holds, "{key}: x holds");
    run(&mut env.c, &(kind.release_x)(key, &xv));
    assert_eq!(read_line(kind, &mut env.o, key), kind.free, "{key}: released");
    assert_eq!(env.sub.take(), (kind.on_x_release)(key), "{key}: x's release");
    outcome
}

/// Every way, [`rounds`] times each, on fresh keys; then a replica and `DEBUG RELOAD`
/// compared with the primary. Fails with the number of rounds that saw a given-back grant.
fn every_way(name: &str) {
    let kind = kind(name);
    let s = Server::start();
    let r = s.replica();
    let (sub, c, o) = (s.subscriber(), s.conn(), s.conn());
    let mut env = Env { s, sub, c, o };
    let mut report = Vec::new();
    let mut failed = false;
    for way in WAYS {
        let (mut bad, mut dropped) = (0, 0);
        let mut by_read = std::collections::BTreeMap::<&str, usize>::new();
        let mut first = None;
        for i in 0..rounds() {
            let mut seen = Vec::new();
            if round(&mut env, &kind, &format!("{name}-{way:?}-{i}"), way, &mut seen) == Outcome::Dropped {
                dropped += 1;
            }
            bad += usize::from(!seen.is_empty());
            for (what, line) in seen {
                *by_read.entry(what).or_default() += 1;
                first.get_or_insert(line);
            }
        }
        report.push(format!("{name} {way:?}: {bad} of {} rounds saw a grant given back ({dropped} dropped)", rounds()));
        report.extend(by_read.iter().map(|(what, n)| format!("  {what}: {n}")));
        report.extend(first.map(|l| format!("  first: {l}")));
        failed |= bad > 0;
    }
    eprintln!("{}", report.join("\n"));
    assert!(!failed, "{}", report.join("\n"));
    let mut c = env.s.conn();
    wait_replica_for_all(&mut c);
    let before = diff::dump(&mut c);
    assert_eq!(before, diff::dump(&mut r.conn()), "the replica differs");
    common::fenced::reload_changes_only_the_era(&mut c, &before);
}

#[test]
fn a_reentrant_grant_given_back_is_never_seen() {
    every_way("lock");
}

#[test]
fn a_fenced_grant_given_back_is_never_seen() {
    every_way("fenced");
}

#[test]
fn a_read_grant_given_back_is_never_seen() {
    every_way("read");
}

#[test]
fn a_write_grant_given_back_is_never_seen() {
    every_way("write");
}

#[test]
fn a_fair_grant_given_back_is_never_seen() {
    every_way("fair");
}

#[test]
fn a_semaphore_grant_given_back_is_never_seen() {
    every_way("semaphore");
}

#[test]
fn an_expirable_semaphore_grant_given_back_is_never_seen() {
    every_way("psemaphore");
}

#[test]
fn a_rate_limiter_grant_given_back_is_never_seen() {
    every_way("ratelimiter");
}

#[test]
fn a_latch_wait_dropped_takes_nothing_and_leaves_nothing() {
    every_way("latch");
}

/// Parks `w`, then `x`, behind `holder` on the reentrant lock `key` of a fresh server.
fn parked_pair(key: &str) -> (Env, Server, Vec<String>, Pinged, Pinged) {
    let s = Server::start();
    let r = s.replica();
    let (sub, c, o) = (s.subscriber(), s.conn(), s.conn());
    let mut env = Env { s, sub, c, o };
    let (release, w, x) = park(&mut env, &kind("lock"), key);
    (env, r, release, w, x)
}

/// Granted, then writes paused, then killed (one transaction): the give-back waits for writes
/// to resume, and meanwhile `LOCK.HOLDS` (the libraries' settle) reads `w` holding nothing,
/// although the keyspace, which the module may not write, still shows its hold.
#[test]
fn a_grant_dropped_while_writes_are_paused_is_not_held_meanwhile() {
    let (mut env, r, release, mut w, mut x) = parked_pair("m");
    let id = w.id.to_string();
    let kill = strs(&["CLIENT", "KILL", "ID", &id]);
    let pause = strs(&["CLIENT", "PAUSE", "60000", "WRITE"]);
    let _: Value = redis::pipe()
        .atomic()
        .add_command(cmd(&release))
        .add_command(cmd(&pause))
        .add_command(cmd(&kill))
        .query(&mut env.c)
        .expect("the holder's transaction");
    assert_eq!(w.answer(), Answer::Gone);
    let holds = |c: &mut redis::Connection| ok(c, &["LOCK.HOLDS", "m", "w"]);
    assert_eq!(holds(&mut env.o), Value::Int(0), "the settle reads w holding its dropped grant");
    // The module polls for the pause's end every few ms: it must not write meanwhile.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(hgetall(&mut env.o, "m"), map(&[("w", "1")]), "written during the pause");
    assert_eq!(holds(&mut env.o), Value::Int(0));
    assert_eq!(lockmod_field(&mut env.o, "grants_given_back"), 0);
    assert_eq!(blocked_clients(&mut env.o), 1, "x was served during the pause");
    ok(&mut env.c, &["CLIENT", "UNPAUSE"]);
    assert_eq!(x.answer(), Answer::Reply(Value::Nil), "x is served once writes resume");
    assert_eq!(hgetall(&mut env.o, "m"), map(&[("x", "1")]));
    assert_eq!(holds(&mut env.o), Value::Int(0));
    assert_eq!(lockmod_field(&mut env.o, "grants_given_back"), 1);
    assert_eq!(env.sub.take(), msgs(&[(&names::lock_channel("m"), "0"), (&names::lock_channel("m"), "0")]));
    wait_replica_for_all(&mut env.c);
    assert_eq!(diff::dump(&mut env.c), diff::dump(&mut r.conn()), "the replica differs");
}

/// A script that reads the lock for a while, then again; `w`'s connection closes meanwhile
/// (Redis handles it while the script is busy), its grant's reply not yet written.
const BUSY_READ: &str =
    "local function ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end \
    local start = ms() while ms() - start < tonumber(ARGV[1]) do end \
    return redis.call('HGETALL', KEYS[1])";

/// A disconnect Redis handles while a script is busy drops a grant's reply: the give-back
/// waits for the script's end, so the script reads the same lock to its end, and the next
/// command sees the grant given back.
#[test]
fn a_grant_dropped_while_a_script_runs_goes_back_after_the_script() {
    let (mut env, r, release, w, mut x) = parked_pair("m");
    ok(&mut env.c, &["CONFIG", "SET", "busy-reply-threshold", "20"]);
    let mut both = cmd(&release).get_packed_command();
    both.extend(redis::cmd("EVAL").arg(BUSY_READ).arg(1).arg("m").arg(3000).get_packed_command());
    env.c.send_packed_command(&both).expect("send");
    // The script is busy once other clients are refused.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !call(&mut env.o, &["LOCK.HOLDS", "m", "w"]).is_err_and(|e| e.starts_with("BUSY")) {
        assert!(std::time::Instant::now() < deadline, "the script never got busy");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(w);
    assert_eq!(env.c.recv_response().expect("the release"), Value::Int(1));
    let seen = env.c.recv_response().expect("the script");
    assert_eq!(show(&seen), "[w 1]", "the lock changed under the running script");
    assert_eq!(x.answer(), Answer::Reply(Value::Nil), "x is served after the script");
    assert_eq!(hgetall(&mut env.o, "m"), map(&[("x", "1")]));
    assert_eq!(lockmod_field(&mut env.o, "grants_given_back"), 1);
    assert_eq!(env.sub.take(), msgs(&[(&names::lock_channel("m"), "0"), (&names::lock_channel("m"), "0")]));
    wait_replica_for_all(&mut env.c);
    assert_eq!(diff::dump(&mut env.c), diff::dump(&mut r.conn()), "the replica differs");
}

/// A primary demoted (`REPLICAOF`) right after a grant unblocks the waiter (`UNBLOCKED`). Redis
/// does so while it still is a primary, so the give-back is written there (Valkey 9 already
/// counts as a replica then, and drops it); either way the old primary then takes the new
/// primary's dataset (its offset, past the grant, rules out a partial resync): the two end
/// equal, and the new primary keeps the lock as it had it.
#[test]
fn a_grant_dropped_by_a_demotion_leaves_the_old_primary_equal_to_the_new() {
    let (mut env, promoted, release, mut w, _x) = parked_pair("m");
    wait_replica_for_all(&mut env.c);
    ok(&mut promoted.conn(), &["REPLICAOF", "NO", "ONE"]);
    let port = promoted.port.to_string();
    let _: Value = redis::pipe()
        .add_command(cmd(&release))
        .cmd("REPLICAOF")
        .arg(&["127.0.0.1", &port])
        .query(&mut env.c)
        .expect("release, then demote");
    // Redis closes the connection after the error.
    let told = w.answer_or_gone();
    assert!(matches!(&told, Answer::Error(e) if e.starts_with("UNBLOCKED")), "told {told:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let info: String = redis::cmd("INFO").arg("replication").query(&mut env.o).expect("INFO");
        if info.contains("master_link_status:up") && diff::dump(&mut env.o) == diff::dump(&mut promoted.conn()) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the old primary never matched the new one: {info}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(hgetall(&mut env.o, "m"), map(&[("holder", "1")]), "the new primary's lock");
}
