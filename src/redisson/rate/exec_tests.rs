// Test code only (never in the module): an unwrap or panic here is how a test reports failure.

use super::*;
use crate::core::memory::MemoryStore;
use crate::core::store::Store;
use crate::redisson::rate::table::ROWS;

const FIVE: [&[u8]; 5] = [b"l", b"{l}:value", b"{l}:value:id", b"{l}:permits", b"{l}:permits:id"];

#[test]
fn each_row_reaches_its_body() {
    let mut s = MemoryStore::at(1_700_000_000_000);
    // trySetRate (3.38+), then tryAcquire and availablePermits of the current release.
    let row = |sha: &str| ROWS.iter().find(|r| r.sha.starts_with(sha)).unwrap().kind;
    let set: [&[u8]; 4] = [b"5", b"1000", b"0", b"0"];
    assert_eq!(answer(&mut s, row("38980404"), &FIVE[..1], &set), Ok(Reply::Int(1)));
    let take: [&[u8]; 3] = [b"2", b"1700000000000", b"0123456789abcdef"];
    assert_eq!(answer(&mut s, row("861d9229"), &FIVE, &take), Ok(Reply::Nil));
    assert_eq!(answer(&mut s, row("1378f96e"), &FIVE, &[b"1700000000001"]), Ok(Reply::Bulk(b"3".to_vec())));
    assert_eq!(s.get(b"{l}:value").unwrap(), Some(b"3".to_vec()));
    // The expiry helpers on the five keys, then a past time: the Lua's.
    assert_eq!(answer(&mut s, row("3fd750e0"), &FIVE, &[b"60000", b""]), Ok(Reply::Int(1)));
    assert_eq!(s.pttl(b"l"), 60_000);
    assert_eq!(answer(&mut s, row("3fd750e0"), &FIVE, &[b"-1", b""]), Err(Why::Odd));
    assert_eq!(answer(&mut s, row("3e87b23a"), &FIVE, &[]), Ok(Reply::Int(1)));
    assert_eq!(s.pttl(b"l"), -1);
}
