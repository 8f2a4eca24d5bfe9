//! Part 7's states of the module's server (what runs there while other traffic is measured),
//! shared by the time-based table (`part7.rs`) and the instruction counts (`part7_instr.rs`).

use std::thread::JoinHandle;

use crate::server::{call_s, info_f64, Res, Server};
use crate::strs;

/// What runs on the module's server while the traffic is measured.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum State {
    Idle,
    Held,
    Indexed,
    Parked,
    Fair,
}

/// Every state, in the order measured.
pub(crate) const STATES: [State; 5] = [State::Idle, State::Held, State::Indexed, State::Parked, State::Fair];

impl State {
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Idle => "loaded, idle",
            State::Held => "100 locks held",
            State::Indexed => "read holds indexed (8 locks x 100 holds)",
            State::Parked => "16 clients parked with BLOCK on 8 held locks",
            State::Fair => "4 fair queues of 50 waiters, 2 parked on each",
        }
    }
}

/// Keeps the state as it was set up between runs: the read-hold index is dropped after 5 s
/// without a read unlock, so each run on the module's server is preceded by one per lock.
pub(crate) fn refresh(s: &Server, state: State) -> Res<()> {
    if state == State::Indexed {
        let mut c = s.conn()?;
        for l in 0..8 {
            let key = format!("tax:rw:{l}");
            call_s(&mut c, &["RWLOCK.UNLOCK", &key, "reader-1", "READ", "600000"])?;
            call_s(&mut c, &["RWLOCK.RLOCK", &key, "reader-1", "600000"])?;
        }
        if info_f64(&mut c, "lockmod", "lockmod_command_filter")? < 1.0 {
            return Err("part 7: the read-hold index (and the filter's look at keys) went away".into());
        }
    }
    Ok(())
}

/// Clients parked on the module's server for a state, released (killed) by [`Parked::end`].
pub(crate) struct Parked {
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

    pub(crate) fn end(self, s: &Server) -> Res<()> {
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
pub(crate) fn enter(s: &Server, state: State) -> Res<Parked> {
    let mut c = s.conn()?;
    call_s(&mut c, &["FLUSHALL"])?;
    let mut parked = Parked { ids: vec![], threads: vec![] };
    let lease = "600000";
    match state {
        State::Idle => {}
        State::Held => {
            for l in 0..100 {
                call_s(&mut c, &["LOCK.ACQUIRE", &format!("tax:held:{l}"), "holder", lease])?;
            }
        }
        State::Indexed => {
            for l in 0..8 {
                let key = format!("tax:rw:{l}");
                for o in 0..100 {
                    call_s(&mut c, &["RWLOCK.RLOCK", &key, &format!("reader-{o}"), lease])?;
                }
                call_s(&mut c, &["RWLOCK.UNLOCK", &key, "reader-0", "READ", lease])?;
            }
            if info_f64(&mut c, "lockmod", "lockmod_indexed_read_holds")? <= 0.0 {
                return Err("part 7: the read-hold index was not built".into());
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
            return Err(format!("part 7: {want} clients did not park"));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(parked)
}
