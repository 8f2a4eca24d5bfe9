//! Wake-ups and index invalidation without keyspace events of ordinary writes: the module
//! subscribes to `expired` and `evicted` events only, and only once it granted a lock (`INFO
//! lockmod` says so). Parked clients learn of other clients' writes (Redisson's Lua included)
//! from a poll of their locks; the read-hold index from the module's one command filter, which
//! looks at keys only while the index has entries and drops everything at `EXEC` (queued
//! commands were filtered too early).

use crate::common;

use std::collections::HashMap;
use std::thread;

use common::parked::wait_blocked;
use common::*;

/// The only keyspace event classes the module may subscribe to.
const SUBSCRIBED: &str = "expired,evicted";

fn lockmod_info(c: &mut redis::Connection) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg("lockmod").query(c).expect("INFO lockmod");
    text.lines()
        .filter_map(|l| l.strip_prefix("lockmod_"))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

fn subscriptions(c: &mut redis::Connection) -> String {
    lockmod_info(c).get("keyspace_subscriptions").cloned().expect("lockmod_keyspace_subscriptions")
}

fn indexed(c: &mut redis::Connection) -> i64 {
    lockmod_info(c).get("indexed_read_holds").and_then(|v| v.parse().ok()).expect("indexed_read_holds")
}

/// Starts `cmd... BLOCK 20000` on its own connection. A wake-up that never comes shows as a
/// timeout, which [`assert_woken`] tells apart from a hand-off.
fn park(s: &Server, cmd: &[&str]) -> thread::JoinHandle<Result<Value, String>> {
    let mut c = s.conn();
    let mut args: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
    args.extend(["BLOCK".to_string(), "20000".to_string()]);
    thread::spawn(move || call(&mut c, &args.iter().map(String::as_str).collect::<Vec<_>>()))
}

/// `n` parked clients so far were handed their lock by a wake-up, none by their timeout.
fn assert_woken(c: &mut redis::Connection, n: i64) {
    let info = lockmod_info(c);
    assert_eq!(info["handoffs"], n.to_string(), "{info:?}");
    assert_eq!(info["block_timeouts"], "0", "{info:?}");
}

fn lua(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/lua").join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_module_subscribes_to_expired_and_evicted_events_only_in_every_state() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(subscriptions(&mut c), "none", "idle: not even those");
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    assert_eq!(subscriptions(&mut c), SUBSCRIBED, "a granted lock's expiry is counted");
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "60000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "60000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "60000"]);
    assert_eq!(indexed(&mut c), 1);
    assert_eq!(subscriptions(&mut c), SUBSCRIBED, "with a parked client and an index entry");
    assert_eq!(ok(&mut c, &["LOCK.UNLOCK", "k", "a", "60000"]), Value::Int(1));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
}

#[test]
fn a_foreign_lua_release_wakes_a_parked_client() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    let sub = s.subscriber();
    // Redisson's unlock script, run by a Redisson client on the module's lock.
    let unlock = lua("lock_unlock.lua");
    let channel = names::lock_channel("k");
    assert_eq!(ok(&mut c, &["EVAL", &unlock, "2", "k", &channel, "a", "60000"]), Value::Int(1));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
    assert_near(pttl(&mut c, "k"), 60_000, 1_000);
    assert_eq!(sub.take_n(1, std::time::Duration::from_secs(5)), msgs(&[(channel.as_str(), "0")]));
    assert_eq!(subscriptions(&mut c), SUBSCRIBED);
}

#[test]
fn hdel_and_del_inside_a_script_wake_parked_clients() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["EVAL", "return redis.call('hdel', KEYS[1], ARGV[1])", "1", "k", "a"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));

    let w = park(&s, &["LOCK.ACQUIRE", "k", "c", "60000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["EVAL", "return redis.call('del', KEYS[1])", "1", "k"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 2);
    assert_eq!(hgetall(&mut c, "k"), map(&[("c", "1")]));
}

#[test]
fn a_lock_named_after_the_first_key_of_del_or_unlink_still_wakes_its_clients() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["SET", "x", "1"]);
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["UNLINK", "x", "k"]), Value::Int(2));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));

    let w = park(&s, &["LOCK.ACQUIRE", "k", "c", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["DEL", "y", "z", "k"]), Value::Int(1));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 2);
    assert_eq!(hgetall(&mut c, "k"), map(&[("c", "1")]));
}

/// `MULTI` queues the `DEL` while nobody waits for the lock; the client parks before `EXEC`
/// runs it. No filter saw the `DEL` when it ran; the poll of parked locks finds the lock gone.
#[test]
fn a_del_queued_in_multi_before_anyone_parked_wakes_the_client_at_exec() {
    let s = Server::start();
    let mut c = s.conn();
    let mut m = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    ok(&mut m, &["MULTI"]);
    assert_eq!(ok(&mut m, &["DEL", "k"]), Value::SimpleString("QUEUED".into()));
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut m, &["EXEC"]), Value::Array(vec![Value::Int(1)]));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    assert_eq!(hgetall(&mut c, "k"), map(&[("b", "1")]));
}

/// A read unlock builds the index between the queueing of a foreign `PEXPIRE` on a timeout
/// key and the `EXEC` that runs it: the entry is dropped at `EXEC`, and the next unlock sees
/// the new lease.
#[test]
fn a_timeout_key_change_queued_before_the_index_existed_is_seen_after_exec() {
    let s = Server::start();
    let mut c = s.conn();
    let mut m = s.conn();
    for i in 0..10 {
        ok(&mut c, &["RWLOCK.RLOCK", "doc", &format!("r{i}"), &(10_000 + i * 1000).to_string()]);
    }
    ok(&mut m, &["MULTI"]);
    ok(&mut m, &["PEXPIRE", &names::read_timeout("doc", "r1", 1), "60000"]);
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r0", "READ", "1"]), Value::Int(0));
    assert_eq!(indexed(&mut c), 9);
    assert_eq!(ok(&mut m, &["EXEC"]), Value::Array(vec![Value::Int(1)]));
    assert_eq!(indexed(&mut c), 0, "EXEC dropped the entry");
    assert_eq!(ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r2", "READ", "1"]), Value::Int(0));
    assert_near(pttl(&mut c, "doc"), 60_000, 200);
}

/// Redisson's cancel script takes the waiter ahead out of the fair queue: the parked waiter
/// behind it is first in line for the free lock and is granted it.
#[test]
fn a_redisson_waiter_leaving_the_fair_queue_by_lua_lets_the_parked_waiter_in() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "h", "60000", "60000"]);
    // A Redisson waiter queues (no BLOCK), then a module client parks behind it.
    assert!(matches!(ok(&mut c, &["FAIRLOCK.ACQUIRE", "f", "r", "60000", "60000"]), Value::Int(_)));
    let w = park(&s, &["FAIRLOCK.ACQUIRE", "f", "p", "60000", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(ok(&mut c, &["FAIRLOCK.UNLOCK", "f", "h", "60000"]), Value::Int(1));
    let queue = names::fair_queue("f");
    let deadlines = names::fair_timeouts("f");
    let cancel = lua("fair_cancel.lua");
    assert_eq!(ok(&mut c, &["EVAL", &cancel, "3", "f", &queue, &deadlines, "r", "60000"]), Value::Int(1));
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    assert_eq!(hgetall(&mut c, "f"), map(&[("p", "1")]));
    assert_eq!(ok(&mut c, &["LLEN", &queue]), Value::Int(0));
    assert_eq!(subscriptions(&mut c), SUBSCRIBED);
}

/// The filter watches names only while read holds are indexed: an indexed lock's name counts
/// once, and goes when its entry does. Parked clients add none (they are polled).
#[test]
fn names_are_watched_only_while_read_holds_are_indexed() {
    let s = Server::start();
    let mut c = s.conn();
    let watched = |c: &mut redis::Connection| lockmod_info(c)["watched_names"].parse::<i64>().expect("watched_names");
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(watched(&mut c), 0, "a parked client needs no watched name");
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "60000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "60000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "60000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "60000"]);
    assert_eq!(watched(&mut c), 1);
    ok(&mut c, &["DEL", "doc"]);
    assert_eq!(watched(&mut c), 0);
}

fn counter(c: &mut redis::Connection, name: &str) -> i64 {
    lockmod_info(c).get(name).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("lockmod_{name}"))
}

/// The module's one command filter looks at other commands' keys only while a read hold is
/// indexed (otherwise it tests one flag); a parked client is polled instead.
#[test]
fn the_command_filter_looks_at_keys_only_while_read_holds_are_indexed() {
    let s = Server::start();
    let mut c = s.conn();
    assert_eq!(counter(&mut c, "command_filter"), 0, "idle");
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    assert_eq!(counter(&mut c, "command_filter"), 0, "a client is parked");
    ok(&mut c, &["DEL", "k"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, 1);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "60000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "60000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "60000"]);
    assert_eq!(counter(&mut c, "command_filter"), 1, "a read hold is indexed");
    ok(&mut c, &["HSET", "doc", "r2", "2"]);
    assert_eq!(counter(&mut c, "indexed_read_holds"), 0);
    assert_eq!(counter(&mut c, "command_filter"), 0, "the foreign write dropped the entry");
}

/// `CONFIG RESETSTAT` while nothing is watched still resets the counters, at once: the filter
/// that sees it is always registered.
#[test]
fn a_reset_made_while_nothing_is_watched_resets_the_counters_at_once() {
    let s = Server::start();
    let mut c = s.conn();
    for owner in ["a", "b", "c"] {
        ok(&mut c, &["LOCK.ACQUIRE", owner, owner, "60000"]);
    }
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(counter(&mut c, "acquired"), 0);
    ok(&mut c, &["LOCK.ACQUIRE", "d", "d", "60000"]);
    assert_eq!(counter(&mut c, "acquired"), 1);
    assert_eq!(counter(&mut c, "acquired"), 1, "a second look sees no reset");
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    assert_eq!(counter(&mut c, "acquired"), 0, "the second reset too");
}

/// While read holds are indexed (the filter looking at every command's keys) the reset is
/// seen all the same.
#[test]
fn a_reset_made_while_read_holds_are_indexed_is_seen_by_the_filter() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r1", "60000"]);
    ok(&mut c, &["RWLOCK.RLOCK", "doc", "r2", "60000"]);
    ok(&mut c, &["RWLOCK.UNLOCK", "doc", "r1", "READ", "60000"]);
    assert_eq!(counter(&mut c, "command_filter"), 1);
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    ok(&mut c, &["LOCK.ACQUIRE", "x", "x", "60000"]);
    assert_eq!(counter(&mut c, "acquired"), 1);
    assert_eq!(counter(&mut c, "released"), 0);
}

/// A reset made while a client is parked: what follows it is counted exactly, the hand-off to
/// the parked client included.
#[test]
fn a_reset_made_while_a_client_is_parked_counts_what_follows_exactly() {
    let s = Server::start();
    let mut c = s.conn();
    ok(&mut c, &["LOCK.ACQUIRE", "k", "a", "60000"]);
    let w = park(&s, &["LOCK.ACQUIRE", "k", "b", "60000"]);
    wait_blocked(&mut c, 1);
    ok(&mut c, &["CONFIG", "RESETSTAT"]);
    ok(&mut c, &["LOCK.ACQUIRE", "x", "x", "60000"]);
    ok(&mut c, &["LOCK.UNLOCK", "k", "a", "60000"]);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_eq!(counter(&mut c, "acquired"), 2, "x, and the hand-off to b");
    assert_eq!(counter(&mut c, "handoffs"), 1);
}

/// Our own release hands the lock over inside the releasing command: the next command of the
/// same pipeline (processed before any timer could run) already sees the parked client as the
/// holder, for each kind of lock.
#[test]
fn our_own_unlock_hands_over_within_the_command_for_every_kind() {
    let s = Server::start();
    let mut c = s.conn();
    // (take it, park on it, release it, its key)
    type Case<'a> = (&'a [&'a str], &'a [&'a str], &'a [&'a str], &'a str);
    let cases: [Case; 3] = [
        (
            &["LOCK.ACQUIRE", "k", "a", "60000"],
            &["LOCK.ACQUIRE", "k", "b", "60000"],
            &["LOCK.UNLOCK", "k", "a", "60000"],
            "k",
        ),
        (
            &["RWLOCK.WLOCK", "rw", "a", "60000"],
            &["RWLOCK.WLOCK", "rw", "b", "60000"],
            &["RWLOCK.UNLOCK", "rw", "a", "WRITE", "60000"],
            "rw",
        ),
        (
            &["FAIRLOCK.ACQUIRE", "f", "a", "60000", "60000"],
            &["FAIRLOCK.ACQUIRE", "f", "b", "60000", "60000"],
            &["FAIRLOCK.UNLOCK", "f", "a", "60000"],
            "f",
        ),
    ];
    for (i, (hold, wait, release, key)) in cases.into_iter().enumerate() {
        ok(&mut c, hold);
        let w = park(&s, wait);
        wait_blocked(&mut c, 1);
        let mut p = redis::pipe();
        p.cmd(release[0]);
        for a in &release[1..] {
            p.arg(*a);
        }
        p.cmd("HGETALL").arg(key);
        let (_, after): (Value, Value) = p.query(&mut c).expect("pipeline");
        let fields = match after {
            Value::Array(v) => v,
            Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
            other => panic!("HGETALL {key}: {other:?}"),
        };
        let holds_b = fields.iter().any(|f| matches!(f, Value::BulkString(b) if b.starts_with(b"b")));
        assert!(holds_b, "{key}: right after the unlock, in the same pipeline: {fields:?}");
        assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
        assert_woken(&mut c, i as i64 + 1);
    }
}

/// A chain of hand-offs by our own unlocks, for each kind, arms no timer: the releasing
/// command serves the lock itself (`serve_timers` counts the 0 ms timers armed to serve
/// locks), while an expiry (an `expired` event, no place to write) still needs one.
#[test]
fn our_own_unlocks_hand_over_without_arming_a_timer_and_an_expiry_arms_one() {
    let s = Server::start();
    let mut c = s.conn();
    let timers = |c: &mut redis::Connection| -> i64 {
        lockmod_info(c).get("serve_timers").and_then(|v| v.parse().ok()).expect("serve_timers")
    };
    let cases: [(&str, Vec<&str>, Vec<&str>); 3] = [
        ("k", vec!["LOCK.ACQUIRE", "k", "OWNER", "60000"], vec!["LOCK.UNLOCK", "k", "OWNER", "60000"]),
        ("rw", vec!["RWLOCK.WLOCK", "rw", "OWNER", "60000"], vec!["RWLOCK.UNLOCK", "rw", "OWNER", "WRITE", "60000"]),
        ("f", vec!["FAIRLOCK.ACQUIRE", "f", "OWNER", "60000", "60000"], vec!["FAIRLOCK.UNLOCK", "f", "OWNER", "60000"]),
    ];
    let mut woken = 0;
    for (key, take, release) in &cases {
        let with_owner = |cmd: &[&str], owner: &str| -> Vec<String> {
            cmd.iter().map(|a| if *a == "OWNER" { owner.to_string() } else { a.to_string() }).collect()
        };
        let as_strs = |v: &Vec<String>| v.iter().map(String::as_str).collect::<Vec<_>>().join(" ");
        ok(&mut c, &with_owner(take, "o0").iter().map(String::as_str).collect::<Vec<_>>());
        let before = timers(&mut c);
        // Three parked clients, each handed the lock by the previous holder's unlock.
        let waiters: Vec<_> = (1..=3)
            .map(|i| {
                let cmd = with_owner(take, &format!("o{i}"));
                let w = park(&s, &cmd.iter().map(String::as_str).collect::<Vec<_>>());
                wait_blocked(&mut c, i);
                w
            })
            .collect();
        for i in 0..3 {
            let cmd = with_owner(release, &format!("o{i}"));
            let reply = call(&mut c, &cmd.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(matches!(reply, Ok(Value::Int(1))), "{}: {reply:?}", as_strs(&cmd));
        }
        for w in waiters {
            assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
        }
        woken += 3;
        assert_woken(&mut c, woken);
        assert_eq!(timers(&mut c), before, "{key}: our own unlocks armed the serve timer");
        ok(&mut c, &with_owner(release, "o3").iter().map(String::as_str).collect::<Vec<_>>());
    }
    // The counter does count: a lease running out is seen through Redis' `expired` event,
    // whose callback may not write, so its lock is served from the timer.
    ok(&mut c, &["LOCK.ACQUIRE", "d", "a", "200"]);
    let w = park(&s, &["LOCK.ACQUIRE", "d", "b", "60000"]);
    wait_blocked(&mut c, 1);
    let before = timers(&mut c);
    assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    assert_woken(&mut c, woken + 1);
    assert!(timers(&mut c) > before, "an expiry must be served by the timer");
}

/// More locks with parked clients than the poll looks at per tick (it takes them round-robin,
/// a bounded number per tick): a plain `DEL` of all of them still wakes every client, by a
/// hand-off, none by its timeout.
#[test]
fn a_foreign_del_of_more_parked_locks_than_one_poll_tick_looks_at_wakes_every_client() {
    const LOCKS: usize = 100;
    let s = Server::start();
    let mut c = s.conn();
    let names: Vec<String> = (0..LOCKS).map(|i| format!("many:{i}")).collect();
    for n in &names {
        ok(&mut c, &["LOCK.ACQUIRE", n, "holder", "60000"]);
    }
    let waiters: Vec<_> = names.iter().map(|n| park(&s, &["LOCK.ACQUIRE", n, "w", "60000"])).collect();
    wait_blocked(&mut c, LOCKS);
    let mut del = vec!["DEL"];
    del.extend(names.iter().map(String::as_str));
    assert_eq!(ok(&mut c, &del), Value::Int(LOCKS as i64));
    for w in waiters {
        assert_eq!(w.join().expect("thread"), Ok(Value::Nil));
    }
    assert_woken(&mut c, LOCKS as i64);
    for n in &names {
        assert_eq!(hgetall(&mut c, n), map(&[("w", "1")]));
    }
}
