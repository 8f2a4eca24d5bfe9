//! The script-cache belief: every change the filter sees makes it unknown, never wrongly
//! present. One test at a time: the state is the server's, a static.

use super::*;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn fresh(tracked: bool, evicts: bool) -> std::sync::MutexGuard<'static, ()> {
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    reset(tracked, evicts);
    guard
}

fn unknown(row: usize) -> bool {
    !present(row) && !absent(row)
}

#[test]
fn a_script_is_present_only_once_the_cache_said_so_and_a_flush_forgets_it() {
    let _g = fresh(true, false);
    assert!(unknown(0));
    learned(0, true);
    learned(1, false);
    assert!(present(0) && absent(1));
    flushed(Some((7, false)));
    assert!(unknown(0) && unknown(1));
}

#[test]
fn a_load_or_an_eval_left_to_lua_makes_an_absent_script_unknown_not_present() {
    let _g = fresh(true, false);
    learned(2, false);
    may_load(2, || Some((1, false)));
    assert!(unknown(2));
    learned(2, true);
    may_load(2, || Some((1, false)));
    assert!(present(2));
    learned(3, false);
    on_exec(|| Some((1, false)));
    assert!(absent(3), "no load was queued");
}

#[test]
fn once_a_load_was_queued_every_exec_makes_absent_scripts_unknown_and_keeps_present_ones() {
    let _g = fresh(true, false);
    may_load(4, || Some((9, true)));
    learned(4, false);
    learned(5, true);
    on_exec(|| Some((9, false)));
    assert!(unknown(4) && present(5));
    learned(4, false);
    on_exec(|| None);
    assert!(unknown(4) && present(5));
}

#[test]
fn a_flush_queued_in_multi_forgets_again_at_that_clients_exec_only() {
    let _g = fresh(true, false);
    flushed(Some((5, true)));
    learned(0, true);
    on_exec(|| Some((6, false)));
    assert!(present(0), "another client's EXEC runs no queued flush");
    on_exec(|| Some((5, false)));
    assert!(unknown(0));
    learned(0, true);
    on_exec(|| Some((5, false)));
    assert!(present(0), "the queued flush ran once");
}

#[test]
fn where_the_caller_cannot_be_named_every_exec_forgets() {
    let _g = fresh(true, false);
    flushed(None);
    for _ in 0..3 {
        learned(0, true);
        on_exec(|| None);
        assert!(unknown(0));
    }
}

#[test]
fn too_many_clients_with_queued_flushes_make_every_exec_forget() {
    let _g = fresh(true, false);
    for id in 0..=MAX_QUEUED as u64 {
        flushed(Some((id, true)));
    }
    learned(0, true);
    on_exec(|| Some((10_000, false)));
    assert!(unknown(0));
}

#[test]
fn evals_spend_the_eviction_budget_and_then_forget() {
    let _g = fresh(true, true);
    assert!(budget_unknown());
    learned(0, true);
    eval_may_create(|| Some((1, false)));
    assert!(unknown(0), "an EVAL with the budget unknown may evict");
    learned(0, true);
    learned_size(EVAL_SCRIPTS_KEPT - 2);
    eval_may_create(|| Some((1, false)));
    eval_may_create(|| Some((1, false)));
    assert!(present(0), "two EVALs fill the list without evicting");
    eval_may_create(|| Some((1, false)));
    assert!(unknown(0), "the third may evict");
}

#[test]
fn an_eval_queued_where_the_server_evicts_forgets_at_its_exec() {
    let _g = fresh(true, true);
    learned_size(10);
    learned(0, true);
    eval_may_create(|| Some((3, true)));
    assert!(present(0));
    on_exec(|| Some((3, false)));
    assert!(unknown(0));
}

#[test]
fn evals_change_nothing_where_the_server_never_evicts() {
    let _g = fresh(true, false);
    learned(0, true);
    for _ in 0..1000 {
        eval_may_create(|| None);
    }
    on_exec(|| None);
    assert!(present(0));
}

#[test]
fn with_script_renamed_nothing_is_ever_believed() {
    let _g = fresh(false, false);
    assert!(!tracked());
    learned(0, true);
    learned(1, false);
    assert!(unknown(0) && unknown(1));
}
