//! Unit tests of `era.rs`: the arithmetic, the filter's `INCR` rewrite, and the node's state.
// Test code only: an unwrap or panic here is how a test reports failure.

use super::*;

const E1: i64 = 1 << 32;

#[test]
fn a_floor_is_the_era_shifted_and_the_era_of_a_value_its_high_bits() {
    assert_eq!(floor(0), 0);
    assert_eq!(floor(1), E1);
    assert_eq!(floor(3), 3 * E1);
    assert_eq!(era_of(0), 0);
    assert_eq!(era_of(E1 - 1), 0);
    assert_eq!(era_of(E1), 1);
    assert_eq!(era_of(-7), 0, "a negative counter is in the first era");
    assert_eq!(era_of(i64::MAX), MAX_ERA);
    // The last era's floor still leaves 2^32 - 1 grants before i64::MAX.
    assert_eq!(i64::MAX - floor(MAX_ERA), E1 - 1);
    assert_eq!(floor(MAX_ERA + 5), floor(MAX_ERA), "clamped");
}

#[rustfmt::skip]
#[test]
fn an_event_starts_one_era_above_what_the_node_knew_and_what_the_keyspace_records() {
    let cases: &[(i64, i64, i64)] = &[
        // known, recorded, next
        (0, 0, 1),
        (0, 4, 5),
        (4, 0, 5),
        (7, 4, 8),
        (MAX_ERA, 0, MAX_ERA),
        (-3, -1, 1),
    ];
    for &(known, recorded, want) in cases {
        assert_eq!(next(known, recorded), want, "next({known}, {recorded})");
    }
}

#[rustfmt::skip]
#[test]
fn an_incr_the_filter_cannot_follow_adds_what_lifts_every_database_to_the_floor() {
    use Held::*;
    let f = 5 * E1;
    let cases: &[(&[Held], i64, i64, Option<i64>)] = &[
        // held per database, floor, by, instead
        (&[Absent, Absent], f, 1, Some(f + 1)),          // a name the lost history created
        (&[Int(7), Absent], f, 1, Some(f + 1 - 7)),      // one counter, not moved yet
        (&[Int(7), Int(9)], f, 1, Some(f + 1 - 7)),      // the lowest decides: both end >= f + 1
        (&[Int(f + 3), Absent], f, 1, None),             // moved already: INCR as sent
        (&[Int(f), Int(3)], f, 1, Some(f + 1 - 3)),      // one moved, one not: never below (a jump is safe)
        (&[Int(7)], f, 10, Some(f + 10 - 7)),            // INCRBY 10
        (&[Int(-4)], f, 1, Some(f + 1 + 4)),
        (&[Other, Absent], f, 1, None),                  // INCR fails there anyway
        (&[Int(7)], 0, 1, None),                         // no era yet
        (&[Int(7)], f, 0, None),                         // INCRBY 0, or a decrement: no grant
        (&[Int(7)], f, -1, None),
        (&[Int(i64::MIN)], f, 1, None),                  // overflow: as sent
        (&[Int(f - 1)], f, 1, Some(2)),
    ];
    for &(held, floor, by, want) in cases {
        assert_eq!(incr_instead(held, floor, by), want, "{held:?} floor {floor} by {by}");
    }
}

#[test]
fn an_incr_instead_always_lands_at_or_above_the_floor_in_each_database_below_it() {
    let f = 3 * E1;
    for v in [-10, 0, 1, 99, f - 1] {
        let held = [Held::Int(v), Held::Absent];
        let d = incr_instead(&held, f, 1).expect("rewritten");
        assert!(v + d > f, "{v} + {d}");
    }
}

/// The state is the process's: one test walks through it, in order.
#[test]
fn the_node_state_follows_events_records_and_counters_found_above_the_era() {
    reset();
    assert_eq!((era(), current_floor(), needs_record(), moving()), (0, 0, false, false));
    assert_eq!(floor_for(Some(12)), 0, "no era: tokens are plain counts");
    forget_record();
    assert!(!needs_record(), "nothing to record before an era");

    begin(next(era(), 2));
    assert_eq!(era(), 3);
    assert!(needs_record() && moving());
    assert_eq!(floor_for(None), 3 * E1);
    assert_eq!(floor_for(Some(3 * E1 + 40)), 3 * E1, "a counter moved and granted in this era");
    recorded();
    assert!(!needs_record());

    // While moving, a counter past the era raises it above the counter, to be recorded again.
    assert_eq!(floor_for(Some(7 * E1 + 5)), 8 * E1);
    assert_eq!(era(), 8);
    assert!(needs_record());
    recorded();

    // Once every counter was visited, a counter above the era is one set since: left as is.
    stop_moving();
    assert_eq!(floor_for(Some(20 * E1)), 8 * E1);
    assert_eq!(era(), 8);

    forget_record();
    assert!(needs_record(), "a flush may have taken the record");
    let (_, events) = counts();
    assert!(events >= 1);
    reset();
    assert_eq!((era(), needs_record(), moving()), (0, false, false));

    // The file: every era, era 0 included, is opened by its first fencing write; an era that
    // rises under the walk is opened again.
    assert!(!is_open());
    opened();
    assert!(is_open());
    begin(2);
    assert!(!is_open() && moving());
    opened();
    assert_eq!(floor_for(Some(5 * E1)), 6 * E1);
    assert!(!is_open(), "the raised era is written again before a write in it");

    // An era begun from the file at load is not known to an event until it is opened: the
    // event goes one above the file's era (which it reads too), not above this one.
    reset();
    begin_provisional(next(0, 4));
    assert_eq!((era(), known(), moving(), needs_record(), is_open()), (5, 0, false, true, false));
    assert_eq!(floor_for(None), 5 * E1, "its grants start at its floor");
    opened();
    assert_eq!(known(), 5, "a write in it makes it the node's");
    // The file held 5: a load before any write in era 6 starts era 6 again, not 7.
    begin_provisional(6);
    assert_eq!(known(), 0);
    begin(next(known().max(5), 0));
    assert_eq!((era(), known()), (6, 6), "an event's era is never provisional");
    reset();
    assert_eq!((known(), is_open()), (0, false));
}
