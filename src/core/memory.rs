//! An in-memory [`Store`] with a fake clock, for unit tests of the lock algorithms.
//!
//! It models just enough of Redis: typed values, absolute expiries checked lazily against the
//! fake clock (as Redis does on access), and a log of published messages.
//!
//! Test code only: the parent declares this module under `#[cfg(test)]`, so nothing here is in
//! the module Redis loads; an unwrap or panic here is how a test reports failure.

use std::collections::{BTreeMap, HashMap};

use super::store::{Store, TTL_MISSING, TTL_PERSISTENT};
use super::{LockError, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(Vec<u8>),
    Hash(BTreeMap<Vec<u8>, Vec<u8>>),
    List(Vec<Vec<u8>>),
    Zset(BTreeMap<Vec<u8>, f64>),
}

/// A sorted set: member -> score.
pub type Zset = BTreeMap<Vec<u8>, f64>;

#[derive(Default)]
pub struct MemoryStore {
    pub now: i64,
    pub data: HashMap<Vec<u8>, (Value, Option<i64>)>,
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
    /// A fake ACL: `Some(names denied)` makes the caller restricted.
    pub acl: Option<Vec<Vec<u8>>>,
    /// Every need checked, in order.
    pub checked: Vec<crate::core::access::Need>,
    /// What `over_maxmemory` answers.
    pub oom: bool,
    /// What `token_floor` answers (a fencing era's floor).
    pub token_floor: i64,
    /// The rate limiter's remembered window indexes, by zset key.
    pub rate_index: HashMap<Vec<u8>, crate::core::rate::index::WindowIndex>,
    /// How many times a window's index was rebuilt by a walk.
    pub index_rebuilds: usize,
    /// How many zset members the rate limiter's walks visited.
    pub visited: usize,
    /// A Redis Cluster's slot for the command's key (`Store::cluster_slot`).
    pub slot: Option<u16>,
}

impl MemoryStore {
    pub fn at(now: i64) -> Self {
        MemoryStore { now, ..Default::default() }
    }

    pub fn advance(&mut self, ms: i64) {
        self.now += ms;
    }

    /// Drops `key` if its expiry has passed, as Redis does on access.
    pub fn expire_if_needed(&mut self, key: &[u8]) {
        if let Some((_, Some(at))) = self.data.get(key) {
            if *at <= self.now {
                self.data.remove(key);
            }
        }
    }

    pub fn value(&mut self, key: &[u8]) -> Option<&mut Value> {
        self.expire_if_needed(key);
        self.data.get_mut(key).map(|(v, _)| v)
    }

    /// The hash at `key` as (field, value) strings, for assertions.
    pub fn hash(&mut self, key: &str) -> Vec<(String, String)> {
        match self.value(key.as_bytes()) {
            Some(Value::Hash(h)) => {
                h.iter().map(|(k, v)| (String::from_utf8_lossy(k).into(), String::from_utf8_lossy(v).into())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Published (channel, message) strings, drained.
    pub fn take_published(&mut self) -> Vec<(String, String)> {
        self.published
            .drain(..)
            .map(|(c, m)| (String::from_utf8_lossy(&c).into(), String::from_utf8_lossy(&m).into()))
            .collect()
    }

    fn hash_mut(&mut self, key: &[u8]) -> &mut BTreeMap<Vec<u8>, Vec<u8>> {
        self.expire_if_needed(key);
        let entry = self.data.entry(key.to_vec()).or_insert((Value::Hash(BTreeMap::new()), None));
        if !matches!(entry.0, Value::Hash(_)) {
            *entry = (Value::Hash(BTreeMap::new()), None);
        }
        match &mut entry.0 {
            Value::Hash(h) => h,
            // Test-only store: the line above just stored a hash here.
            _ => unreachable!("just made a hash"),
        }
    }
}

impl MemoryStore {
    fn list_mut(&mut self, key: &[u8]) -> &mut Vec<Vec<u8>> {
        self.expire_if_needed(key);
        let entry = self.data.entry(key.to_vec()).or_insert((Value::List(Vec::new()), None));
        if !matches!(entry.0, Value::List(_)) {
            *entry = (Value::List(Vec::new()), None);
        }
        match &mut entry.0 {
            Value::List(l) => l,
            // Test-only store: the line above just stored a list here.
            _ => unreachable!("just made a list"),
        }
    }

    fn zset_mut(&mut self, key: &[u8]) -> &mut BTreeMap<Vec<u8>, f64> {
        self.expire_if_needed(key);
        let entry = self.data.entry(key.to_vec()).or_insert((Value::Zset(BTreeMap::new()), None));
        if !matches!(entry.0, Value::Zset(_)) {
            *entry = (Value::Zset(BTreeMap::new()), None);
        }
        match &mut entry.0 {
            Value::Zset(z) => z,
            // Test-only store: the line above just stored a zset here.
            _ => unreachable!("just made a zset"),
        }
    }

    /// Deletes `key` if it holds an empty list, hash or zset, as Redis does.
    fn drop_if_empty(&mut self, key: &[u8]) {
        let empty = match self.data.get(key) {
            Some((Value::List(l), _)) => l.is_empty(),
            Some((Value::Zset(z), _)) => z.is_empty(),
            Some((Value::Hash(h), _)) => h.is_empty(),
            _ => false,
        };
        if empty {
            self.data.remove(key);
        }
    }

    fn list(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(Value::List(l)) => Ok(l.clone()),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn zset(&mut self, key: &[u8]) -> Result<BTreeMap<Vec<u8>, f64>> {
        match self.value(key) {
            None => Ok(BTreeMap::new()),
            Some(Value::Zset(z)) => Ok(z.clone()),
            Some(_) => Err(LockError::WrongType),
        }
    }

    /// The list at `key` as strings, for assertions.
    pub fn list_strings(&mut self, key: &str) -> Vec<String> {
        self.list(key.as_bytes()).unwrap_or_default().iter().map(|v| String::from_utf8_lossy(v).into()).collect()
    }

    /// The zset at `key` as (member, score), lowest score first, for assertions.
    pub fn zset_entries(&mut self, key: &str) -> Vec<(String, f64)> {
        let mut z: Vec<(String, f64)> = self
            .zset(key.as_bytes())
            .unwrap_or_default()
            .into_iter()
            .map(|(m, s)| (String::from_utf8_lossy(&m).into(), s))
            .collect();
        z.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        z
    }
}

impl Store for MemoryStore {
    fn now(&self) -> i64 {
        self.now
    }

    fn restricted(&mut self) -> bool {
        self.acl.is_some()
    }

    fn cluster_slot(&mut self) -> Option<u16> {
        self.slot
    }

    fn permit(&mut self, needs: &[crate::core::access::Need]) -> Result<()> {
        use crate::core::access::Need;
        use crate::core::Denied;
        for n in needs {
            self.checked.push(n.clone());
            let (what, name) = match n {
                Need::Key(k, _) => (Denied::Key, k),
                Need::Publish(c) => (Denied::Channel, c),
            };
            if self.acl.as_ref().is_some_and(|denied| denied.contains(name)) {
                return Err(LockError::NoPerm(what, name.clone()));
            }
        }
        Ok(())
    }

    fn exists(&mut self, key: &[u8]) -> bool {
        self.value(key).is_some()
    }

    fn pttl(&mut self, key: &[u8]) -> i64 {
        self.expire_if_needed(key);
        match self.data.get(key) {
            None => TTL_MISSING,
            Some((_, None)) => TTL_PERSISTENT,
            Some((_, Some(at))) => at - self.now,
        }
    }

    fn del(&mut self, key: &[u8]) -> bool {
        self.expire_if_needed(key);
        self.data.remove(key).is_some()
    }

    fn pexpire_at(&mut self, key: &[u8], at: i64) {
        self.expire_if_needed(key);
        if let Some(e) = self.data.get_mut(key) {
            e.1 = Some(at);
        }
    }

    fn hash_get(&mut self, key: &[u8], field: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Hash(h)) => Ok(h.get(field).cloned()),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn hash_len(&mut self, key: &[u8]) -> Result<usize> {
        match self.value(key) {
            None => Ok(0),
            Some(Value::Hash(h)) => Ok(h.len()),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn hash_entries(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(Value::Hash(h)) => Ok(h.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn hash_incr(&mut self, key: &[u8], field: &[u8], by: i64) -> Result<i64> {
        let cur = self.hash_get(key, field)?.and_then(|v| super::parse_i64(&v)).unwrap_or(0);
        let next = super::incremented(cur, by)?;
        self.hash_mut(key).insert(field.to_vec(), next.to_string().into_bytes());
        Ok(next)
    }

    fn hash_set(&mut self, key: &[u8], field: &[u8], value: &[u8]) {
        self.hash_mut(key).insert(field.to_vec(), value.to_vec());
    }

    fn hash_del(&mut self, key: &[u8], field: &[u8]) {
        let h = self.hash_mut(key);
        h.remove(field);
        if h.is_empty() {
            self.data.remove(key);
        }
    }

    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.value(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(_) => Err(LockError::WrongType),
        }
    }

    fn set_px_at(&mut self, key: &[u8], value: &[u8], at: i64) {
        self.data.insert(key.to_vec(), (Value::Str(value.to_vec()), Some(at)));
    }

    fn incr(&mut self, key: &[u8]) -> Result<i64> {
        self.expire_if_needed(key);
        let cur = match self.data.get(key) {
            Some((Value::Str(v), _)) => super::parse_i64(v).unwrap_or(0),
            _ => 0,
        };
        let n = super::incremented(cur, 1)?;
        let entry = self.data.entry(key.to_vec()).or_insert((Value::Str(b"0".to_vec()), None));
        entry.0 = Value::Str(n.to_string().into_bytes());
        Ok(n)
    }

    fn token_floor(&mut self, _v: Option<i64>) -> i64 {
        self.token_floor
    }

    fn raise_token(&mut self, key: &[u8], floor: i64) {
        self.data.insert(key.to_vec(), (Value::Str(floor.to_string().into_bytes()), None));
    }

    fn list_len(&mut self, key: &[u8]) -> Result<usize> {
        self.list(key).map(|l| l.len())
    }

    fn list_index(&mut self, key: &[u8], i: i64) -> Result<Option<Vec<u8>>> {
        let l = self.list(key)?;
        let i = if i < 0 { l.len() as i64 + i } else { i };
        Ok(usize::try_from(i).ok().and_then(|i| l.get(i).cloned()))
    }

    fn list_all(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.list(key)
    }

    fn list_pop_head(&mut self, key: &[u8]) {
        if self.value(key).is_none() {
            return;
        }
        let l = self.list_mut(key);
        if !l.is_empty() {
            l.remove(0);
        }
        self.drop_if_empty(key);
    }

    fn list_push_tail(&mut self, key: &[u8], value: &[u8]) {
        self.list_mut(key).push(value.to_vec());
    }

    fn list_remove(&mut self, key: &[u8], value: &[u8]) -> usize {
        if self.value(key).is_none() {
            return 0;
        }
        let l = self.list_mut(key);
        let before = l.len();
        l.retain(|v| v != value);
        let removed = before - l.len();
        self.drop_if_empty(key);
        removed
    }

    fn zset_len(&mut self, key: &[u8]) -> Result<usize> {
        self.zset(key).map(|z| z.len())
    }

    fn zset_score(&mut self, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
        self.zset(key).map(|z| z.get(member).copied())
    }

    fn zset_add(&mut self, key: &[u8], member: &[u8], score: f64) -> bool {
        self.zset_mut(key).insert(member.to_vec(), score).is_none()
    }

    fn zset_rem(&mut self, key: &[u8], member: &[u8]) -> bool {
        if self.value(key).is_none() {
            return false;
        }
        let removed = self.zset_mut(key).remove(member).is_some();
        self.drop_if_empty(key);
        removed
    }

    fn zset_incr(&mut self, key: &[u8], member: &[u8], by: f64) -> f64 {
        let score = self.zset_mut(key).entry(member.to_vec()).or_insert(0.0);
        *score += by;
        *score
    }

    fn zset_shift_all(&mut self, key: &[u8], by: f64) {
        if self.value(key).is_none() {
            return;
        }
        for score in self.zset_mut(key).values_mut() {
            *score += by;
        }
    }

    fn zset_all(&mut self, key: &[u8]) -> Result<Vec<(Vec<u8>, f64)>> {
        let mut v: Vec<_> = self.zset(key)?.into_iter().collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1));
        Ok(v)
    }

    fn publish(&mut self, channel: &[u8], message: &[u8]) {
        self.published.push((channel.to_vec(), message.to_vec()));
    }

    fn over_maxmemory(&mut self) -> bool {
        self.oom
    }
}
