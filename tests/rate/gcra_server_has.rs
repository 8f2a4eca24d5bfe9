//! A server that already has `GCRA` or `CL.THROTTLE` (Redis built with its own `GCRA`, or
//! redis-cell loaded first): the module still loads, leaves that command alone and registers
//! the rest (issue 30).
//!
//! No Redis release here ships `GCRA`, so the server is given commands of those names with
//! `rename-command` (applied while the configuration is read, before any module loads): to
//! the module it is exactly a server whose own command is called `GCRA`, as it asks the
//! server (`COMMAND INFO`) and not a list of versions.

use crate::common;

use common::*;

fn lockmod_commands(c: &mut redis::Connection) -> Vec<String> {
    let mut names: Vec<String> =
        redis::cmd("COMMAND").arg("LIST").arg("FILTERBY").arg("MODULE").arg("lockmod").query(c).expect("LIST");
    names.sort();
    names
}

#[test]
fn the_module_loads_beside_a_server_gcra_and_cl_throttle_and_leaves_them_alone() {
    let s =
        Server::start_with(true, &["--rename-command", "ECHO", "GCRA", "--rename-command", "LASTSAVE", "CL.THROTTLE"]);
    let mut c = s.conn();
    // The server's own commands answer under those names.
    assert_eq!(ok(&mut c, &["GCRA", "hello"]), Value::BulkString(b"hello".to_vec()));
    assert!(matches!(ok(&mut c, &["CL.THROTTLE"]), Value::Int(_)));
    let mine = lockmod_commands(&mut c);
    assert!(!mine.iter().any(|n| n == "gcra" || n == "cl.throttle"), "{mine:?}");
    assert!(mine.iter().any(|n| n == "lock.acquire"), "the rest is registered: {mine:?}");
    let log = s.log();
    for name in ["GCRA", "CL.THROTTLE"] {
        assert!(log.contains(&format!("the server has its own {name}: lockmod's is not registered")), "{log}");
    }
    assert_eq!(ok(&mut c, &["LOCK.ACQUIRE", "l", "o", "30000"]), Value::Nil);
}

#[test]
fn only_the_taken_name_is_left_alone_and_a_module_loaded_later_sees_the_same() {
    // GCRA taken, CL.THROTTLE free; the module loaded with MODULE LOAD once the server runs.
    let s = Server::start_with(false, &["--rename-command", "ECHO", "GCRA"]);
    let mut c = s.conn();
    let path = module_path();
    ok(&mut c, &["MODULE", "LOAD", path.to_str().expect("path")]);
    let mine = lockmod_commands(&mut c);
    assert!(!mine.contains(&"gcra".to_string()) && mine.contains(&"cl.throttle".to_string()), "{mine:?}");
    assert_eq!(ok(&mut c, &["GCRA", "hi"]), Value::BulkString(b"hi".to_vec()));
    assert_eq!(common::gcra::run(&mut c, &["CL.THROTTLE", "k", "15", "30", "60"]), [0, 16, 15, -1, 2]);
    // Without a GCRA of the server's own, the module's is there.
    let plain = Server::start();
    let mut p = plain.conn();
    assert!(lockmod_commands(&mut p).contains(&"gcra".to_string()));
}
