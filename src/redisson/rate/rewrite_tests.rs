// Test code only (never in the module): an unwrap or panic here is how a test reports failure.

use super::*;
use crate::redisson::rate::table::ROWS;

fn refs(v: &[&str]) -> Vec<Vec<u8>> {
    v.iter().map(|s| s.as_bytes().to_vec()).collect()
}

fn r(v: &[Vec<u8>]) -> Vec<&[u8]> {
    v.iter().map(Vec::as_slice).collect()
}

const FIVE: [&str; 5] = ["l", "{l}:value", "{l}:value:id", "{l}:permits", "{l}:permits:id"];

#[test]
fn the_five_keys_are_the_names_redisson_derives_with_one_client_id() {
    assert_eq!(client_of(&r(&refs(&FIVE))), Some(&b"id"[..]));
    let tagged = ["a{b}", "a{b}:value", "a{b}:value:x", "a{b}:permits", "a{b}:permits:x"];
    assert_eq!(client_of(&r(&refs(&tagged))), Some(&b"x"[..]));
    for bad in [
        ["l", "{l}:value", "{l}:value:id", "{l}:permits", "{l}:permits:other"],
        ["l", "l:value", "l:value:id", "l:permits", "l:permits:id"],
        ["l", "{l}:value", "{l}:valueid", "{l}:permits", "{l}:permitsid"],
        ["m", "{l}:value", "{l}:value:id", "{l}:permits", "{l}:permits:id"],
    ] {
        assert_eq!(client_of(&r(&refs(&bad))), None, "{bad:?}");
    }
}

#[test]
fn an_acquire_is_planned_only_within_what_lua_and_the_module_read_alike() {
    let kind = ROWS[3].kind;
    let keys = refs(&FIVE);
    let plan = |argv: &[&str]| plan(kind, &r(&keys), &r(&refs(argv)));
    let ok = plan(&["1", "1700000000000", "0123456789abcdef"]).expect("planned");
    assert_eq!(ok.len(), 8);
    assert!(plan(&["0", "1700000000000", "r"]).is_some(), "tryAcquire(0)");
    assert!(plan(&["4294967295", "1", "r"]).is_some());
    for bad in [
        ["4294967296", "1", "r"],
        ["-1", "1", "r"],
        ["01", "1", "r"],
        ["1", "1.5", "r"],
        ["1", "9007199254740993", "r"],
    ] {
        assert!(plan(&bad).is_none(), "{bad:?}");
    }
    assert!(plan(&["1", "1", &"r".repeat(256)]).is_none(), "a length byte holds 255");
    assert!(plan(&["1", "1"]).is_none());
}

#[test]
fn every_call_maps_back_to_what_was_sent() {
    for row in ROWS {
        let keys: Vec<Vec<u8>> = refs(&FIVE)[..row.kind.keys()].to_vec();
        let argv: Vec<Vec<u8>> = match row.kind {
            RateKind::Expire | RateKind::ExpireAt => refs(&["60000", "NX"]),
            _ => (0..row.kind.argv()).map(|i| format!("{}", i + 1).into_bytes()).collect(),
        };
        let keys = if row.kind == RateKind::SetRate(crate::core::rate::body_settings::SetRate::Old) {
            refs(&["l", "{l}:value", "{l}:permits"])
        } else {
            keys
        };
        let args = plan(row.kind, &r(&keys), &r(&argv)).unwrap_or_else(|| panic!("{} not planned", row.sha));
        let native: Vec<Vec<u8>> = args
            .iter()
            .map(|a| match a {
                A::Key(i) => keys[*i].clone(),
                A::Argv(i) => argv[*i].clone(),
                A::Lit(l) => l.to_vec(),
                A::Own(o) => o.clone(),
            })
            .collect();
        // The native command's arity: `GCRA`'s is -5, the others' at most that.
        assert!(native.len() + 1 >= 5 || !row.kind.gcra(), "{}", row.sha);
        assert_eq!(script_call(row.kind, &r(&native)), Some((keys.clone(), argv.clone())), "{}", row.sha);
    }
}

#[test]
fn gcras_bodies_run_here_only_on_the_modules_own_gcra() {
    let gcra = ROWS.iter().find(|r| r.kind == RateKind::GcraAcquire).unwrap().kind;
    set_gcra_is_ours(false);
    assert!(!runs_here(gcra));
    assert!(runs_here(ROWS[0].kind));
    set_gcra_is_ours(true);
    assert!(runs_here(gcra));
}
