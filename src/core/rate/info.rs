//! `SYNC.INFO` of a rate limiter: its settings, one state's value, window and parked clients,
//! read without writing. At most `COUNT` grants and parked clients are listed, oldest first.

use super::limiter::{self, Mode};
use super::window::{self, unpack};
use crate::core::lock::info::ParkedList;
use crate::core::rate::store::RateStore;
use crate::core::sync::info::parked_replies;
use crate::core::{Reply, Result};

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn field(name: &str, value: Reply) -> (Reply, Reply) {
    (bulk(name), value)
}

/// Builds the reply for the state `client` uses on limiter `name` at `now` (the server's
/// clock): O(log N + COUNT), and O(N) for a window someone else changed since the module last
/// summed it.
pub fn info<S: RateStore>(
    s: &mut S,
    name: &[u8],
    client: Option<&[u8]>,
    count: usize,
    parked: ParkedList,
    now: i64,
) -> Result<Reply> {
    let l = limiter::look(s, name, client, now)?;
    let c = l.config;
    let z = &l.keys.permits;
    let mut grants = Vec::new();
    let from = window::next_up(l.window.threshold as f64);
    s.zset_scan(z, from, f64::INFINITY, &mut |m, t| {
        let permits = unpack(m).map_or(0, |(_, p)| i64::from(p));
        let expires_in = (t as i64).saturating_add(c.interval).saturating_sub(now);
        grants.push(Reply::Map(vec![
            field("permits", Reply::Int(permits)),
            field("expires_in_ms", Reply::Int(expires_in)),
        ]));
        grants.len() < count
    })?;
    let next = window::oldest_live(s, z, l.window.threshold)?;
    let next = next.map_or(Reply::Nil, |t| Reply::Int((t as i64).saturating_add(c.interval).saturating_sub(now)));
    let parked_shown = parked_replies(&parked, count);
    let int = |n: i64| Reply::Int(n);
    let members = s.zset_len(z)?;
    Ok(Reply::Map(vec![
        field("kind", bulk("ratelimiter")),
        field("type", bulk(if c.mode == Mode::Overall { "overall" } else { "per_client" })),
        field("rate", int(c.rate)),
        field("interval_ms", int(c.interval)),
        field("keepalive_ms", int(c.keep_alive)),
        field("pttl", int(s.pttl(name))),
        field("client", client.filter(|_| c.mode == Mode::PerClient).map_or(Reply::Nil, |id| Reply::Bulk(id.to_vec()))),
        field("value", l.value.map_or(Reply::Nil, Reply::Int)),
        field("available", int(l.available())),
        field("permits_in_window", int(i64::try_from(l.live()).unwrap_or(i64::MAX))),
        field("grants_total", int(members as i64)),
        field("grants", Reply::Array(grants)),
        field("next_grant_expires_in_ms", next),
        field("parked_total", int(parked.total as i64)),
        field("parked", Reply::Array(parked_shown)),
    ]))
}
