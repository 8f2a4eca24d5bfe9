//! Where a key's commands go: the one standalone server, the primary a Sentinel names, or the
//! primary serving the key's slot in a Redis Cluster (a slot map read with `CLUSTER SLOTS`,
//! read again whenever a node says a request was not run there).

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::time::Duration;

use redis::sentinel::SentinelClient;
use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::Error;
use crate::reply;

/// How the library finds the server of a key.
pub(crate) enum Topology {
    /// One server.
    Standalone(ConnectionInfo),
    /// A primary found through Sentinel, asked again after a failover.
    Sentinel { client: Box<tokio::sync::Mutex<SentinelClient>>, primary: RwLock<Option<ConnectionInfo>> },
    /// A Redis Cluster: the seed nodes, and slot ranges (first slot -> (last slot, primary)).
    Cluster { seeds: Vec<ConnectionInfo>, slots: RwLock<BTreeMap<u16, (u16, ConnectionInfo)>> },
}

impl Topology {
    /// The server of `key` as last known (None: not known yet, refresh first).
    pub fn route(&self, key: &str) -> Option<ConnectionInfo> {
        match self {
            Topology::Standalone(info) => Some(info.clone()),
            Topology::Sentinel { primary, .. } => primary.read().ok()?.clone(),
            Topology::Cluster { slots, .. } => {
                let slot = key_slot(key.as_bytes());
                let map = slots.read().ok()?;
                let (_, (last, info)) = map.range(..=slot).next_back()?;
                (slot <= *last).then(|| info.clone())
            }
        }
    }

    /// Learns the topology again (a no-op for a standalone server).
    pub async fn refresh(&self, timeout: Duration) -> Result<(), Error> {
        match self {
            Topology::Standalone(_) => Ok(()),
            Topology::Sentinel { client, primary } => {
                let found = tokio::time::timeout(timeout, async { client.lock().await.async_get_client().await })
                    .await
                    .map_err(|_| Error::Redis(io_error("Sentinel did not answer in time")))??;
                if let Ok(mut p) = primary.write() {
                    *p = Some(found.get_connection_info().clone());
                }
                Ok(())
            }
            Topology::Cluster { seeds, slots } => {
                let mut last = Error::Redis(io_error("no cluster node answered CLUSTER SLOTS"));
                for seed in seeds.iter().chain(known_nodes(slots).iter()) {
                    match read_slots(seed, timeout).await {
                        Ok(map) if !map.is_empty() => {
                            if let Ok(mut s) = slots.write() {
                                *s = map;
                            }
                            return Ok(());
                        }
                        Ok(_) => {}
                        Err(e) => last = e,
                    }
                }
                Err(last)
            }
        }
    }
}

/// Redis Cluster's slot of `key`: CRC16 of its hash tag (the part between the first `{` and
/// the next `}`, when not empty) or of the whole key, modulo 16384.
pub(crate) fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        rest.iter().position(|&b| b == b'}').filter(|&close| close > 0).map(|close| &rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % 16384
}

pub(crate) fn io_error(what: &'static str) -> redis::RedisError {
    redis::RedisError::from((redis::ErrorKind::Io, what))
}

/// Every primary in the current slot map (asked when the seeds are gone).
fn known_nodes(slots: &RwLock<BTreeMap<u16, (u16, ConnectionInfo)>>) -> Vec<ConnectionInfo> {
    slots.read().map(|m| m.values().map(|(_, i)| i.clone()).collect()).unwrap_or_default()
}

/// `info` with another host and port (keeping TLS, credentials and database).
pub(crate) fn with_addr(info: &ConnectionInfo, host: String, port: u16) -> ConnectionInfo {
    let addr = match info.addr() {
        ConnectionAddr::TcpTls { insecure, tls_params, .. } => {
            ConnectionAddr::TcpTls { host, port, insecure: *insecure, tls_params: tls_params.clone() }
        }
        _ => ConnectionAddr::Tcp(host, port),
    };
    info.clone().set_addr(addr)
}

async fn read_slots(seed: &ConnectionInfo, timeout: Duration) -> Result<BTreeMap<u16, (u16, ConnectionInfo)>, Error> {
    let client = redis::Client::open(seed.clone())?;
    let config =
        redis::AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
    let mut conn = client.get_multiplexed_async_connection_with_config(&config).await?;
    let v = conn.send_packed_command(redis::cmd("CLUSTER").arg("SLOTS")).await?;
    let seed_host = match seed.addr() {
        ConnectionAddr::Tcp(h, _) | ConnectionAddr::TcpTls { host: h, .. } => h.clone(),
        ConnectionAddr::Unix(_) => String::new(),
        _ => String::new(),
    };
    let mut map = BTreeMap::new();
    for range in reply::items(&v)? {
        let r = reply::items(range)?;
        let (Some(first), Some(last), Some(primary)) = (r.first(), r.get(1), r.get(2)) else { continue };
        let p = reply::items(primary)?;
        let host = p.first().map(reply::opt_text).transpose()?.flatten().unwrap_or_default();
        // An empty host (or "?") is the node that answered: cluster-announce-ip unset.
        let host = if host.is_empty() || host == "?" { seed_host.clone() } else { host };
        let port = p.get(1).map(reply::int).unwrap_or_else(|| reply::int(&Value::Nil))?;
        let (Ok(first), Ok(last), Ok(port)) =
            (u16::try_from(reply::int(first)?), u16::try_from(reply::int(last)?), u16::try_from(port))
        else {
            continue;
        };
        map.insert(first, (last, with_addr(seed, host, port)));
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::key_slot;

    #[rustfmt::skip]
    #[test]
    fn slots_are_redis_clusters() {
        // Values from CLUSTER KEYSLOT.
        let cases: &[(&str, u16)] = &[
            ("foo", 12182), ("{foo}:bar", 12182), ("redisson_lock_token:{foo}", 12182),
            ("{}foo", 9500), ("a{}b{foo}", 976), ("123456789", 12739),
        ];
        for (key, slot) in cases {
            assert_eq!(key_slot(key.as_bytes()), *slot, "{key}");
        }
    }
}
