//! The fair lock's list (the queue) and zset (the deadlines) on [`RedisStore`]: the same three
//! steps as every write (key API, keyspace event, deterministic replication).
//!
//! Scores are replicated as absolute values (`ZADD key score member`), even where Redisson's
//! Lua runs `ZINCRBY`: the result is the same and a replay never depends on what it finds.

use super::RedisStore;
use crate::core::Result;
use crate::ffi::{Arg, KeyKind};
use redis_module::raw;

const LIST: u32 = raw::REDISMODULE_NOTIFY_LIST as u32;
const ZSET: u32 = raw::REDISMODULE_NOTIFY_ZSET as u32;

/// An integral score (every deadline the module writes) as an integer, exactly.
fn integral(score: f64) -> Option<i64> {
    (score.fract() == 0.0 && score.abs() < 9.0e15).then_some(score as i64)
}

/// A score as Redis parses it back exactly: integral ones as integers, others in the shortest
/// round-trip form.
pub(super) fn score_text(score: f64) -> String {
    if let Some(n) = integral(score) {
        n.to_string()
    } else if score.is_finite() {
        format!("{score}")
    } else if score > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

/// `f` of [`score_text`], on the stack for the integral scores the module writes.
pub(super) fn with_score_text<R>(score: f64, f: impl FnOnce(&[u8]) -> R) -> R {
    match integral(score) {
        Some(n) => f(crate::ffi::IntBuf::default().format(n)),
        None => f(score_text(score).as_bytes()),
    }
}

impl RedisStore<'_> {
    fn typed_len(&mut self, key: &[u8], kind: KeyKind) -> Result<usize> {
        Ok(self.typed(key, kind)?.map_or(0, |k| k.key.len()))
    }

    /// After a write that may have emptied `key`: Redis deleted it; say so as `DEL` would.
    pub(super) fn notify_if_deleted(&self, i: usize) {
        let k = &self.keys[i];
        if k.key.kind() == KeyKind::Empty {
            self.notify_del(k.name.raw());
        }
    }

    pub(super) fn list_len_(&mut self, key: &[u8]) -> Result<usize> {
        self.typed_len(key, KeyKind::List)
    }

    /// Reads the list at `key` through a handle of its own. Redis 7.0's key API keeps one
    /// list iterator per handle, and seeking it back after it has moved can trip an
    /// assertion; a fresh handle seeks from scratch.
    fn with_list<T>(&mut self, key: &[u8], read: impl FnOnce(&crate::ffi::Key) -> T) -> Result<Option<T>> {
        if self.typed(key, KeyKind::List)?.is_none() {
            return Ok(None);
        }
        let name = self.name(key);
        let handle = self.ctx.open_key(name.raw(), false);
        Ok(Some(read(&handle)))
    }

    pub(super) fn list_index_(&mut self, key: &[u8], i: i64) -> Result<Option<Vec<u8>>> {
        Ok(self.with_list(key, |k| k.list_get(i).map(|v| v.bytes().to_vec()))?.flatten())
    }

    pub(super) fn list_all_(&mut self, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        self.list_first_(key, usize::MAX)
    }

    /// The first `n` elements, read in order through one handle (each step moves its iterator
    /// by one: O(n) in all).
    pub(super) fn list_first_(&mut self, key: &[u8], n: usize) -> Result<Vec<Vec<u8>>> {
        let first = |k: &crate::ffi::Key| {
            (0..k.len().min(n) as i64).filter_map(|i| k.list_get(i)).map(|v| v.bytes().to_vec()).collect()
        };
        Ok(self.with_list(key, first)?.unwrap_or_default())
    }

    pub(super) fn list_pop_head_(&mut self, key: &[u8]) {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::List || k.key.list_pop_head().is_none() {
            return;
        }
        self.effect(LIST, c"lpop", k.name.raw(), c"LPOP", &[Arg::S(k.name.raw())]);
        self.notify_if_deleted(i);
    }

    pub(super) fn list_push_tail_(&mut self, key: &[u8], value: &[u8]) {
        let v = self.name(value);
        let i = self.slot(key);
        let k = &self.keys[i];
        k.key.list_push_tail(v.raw());
        self.effect(LIST, c"rpush", k.name.raw(), c"RPUSH", &[Arg::S(k.name.raw()), Arg::S(v.raw())]);
    }

    pub(super) fn list_remove_(&mut self, key: &[u8], value: &[u8]) -> usize {
        let all = self.list_all_(key).unwrap_or_default();
        let kept: Vec<&Vec<u8>> = all.iter().filter(|v| v.as_slice() != value).collect();
        let removed = all.len() - kept.len();
        if removed == 0 {
            return 0;
        }
        // Rebuilt with pops and pushes, which reset the handle's list iterator (deleting in
        // place seeks it); the key keeps its expiry.
        let kept: Vec<crate::ffi::RStr> = kept.iter().map(|v| self.ctx.string(v)).collect();
        let i = self.slot(key);
        let k = &self.keys[i];
        let expiry = k.key.expire_at();
        while k.key.list_pop_head().is_some() {}
        for v in &kept {
            k.key.list_push_tail(v.as_ref());
        }
        if let (Some(at), false) = (expiry, kept.is_empty()) {
            k.key.set_expire_at(at);
        }
        self.effect(LIST, c"lrem", k.name.raw(), c"LREM", &[Arg::S(k.name.raw()), Arg::I(0), Arg::B(value)]);
        self.notify_if_deleted(i);
        removed
    }

    /// Removes every occurrence of each of `values` in one pass (a rebuild, as `list_remove_`).
    /// Replicated as one `LREM` per value when they are few; else as the list's new content
    /// (`DEL`, `RPUSH`, the expiry it had): `k` `LREM`s would cost a replica O(list * k).
    pub(super) fn list_remove_many_(&mut self, key: &[u8], values: &[&[u8]]) -> usize {
        /// Up to this many values, per-value `LREM`s are cheaper to replicate than the list.
        const FEW: usize = 16;
        if values.len() <= 1 {
            return values.first().map_or(0, |v| self.list_remove_(key, v));
        }
        let gone: std::collections::HashSet<&[u8]> = values.iter().copied().collect();
        let all = self.list_all_(key).unwrap_or_default();
        let kept: Vec<&Vec<u8>> = all.iter().filter(|v| !gone.contains(v.as_slice())).collect();
        let removed = all.len() - kept.len();
        if removed == 0 {
            return 0;
        }
        let kept_strs: Vec<crate::ffi::RStr> = kept.iter().map(|v| self.ctx.string(v)).collect();
        let i = self.slot(key);
        let k = &self.keys[i];
        let expiry = k.key.expire_at();
        while k.key.list_pop_head().is_some() {}
        for v in &kept_strs {
            k.key.list_push_tail(v.as_ref());
        }
        if let (Some(at), false) = (expiry, kept.is_empty()) {
            k.key.set_expire_at(at);
        }
        self.ctx.notify(LIST, c"lrem", k.name.raw());
        if gone.len() <= FEW {
            for v in values {
                self.ctx.replicate(c"LREM", &[Arg::B(key), Arg::I(0), Arg::B(v)]);
            }
        } else {
            self.ctx.replicate(c"DEL", &[Arg::B(key)]);
            if !kept.is_empty() {
                let mut args = Vec::with_capacity(1 + kept.len());
                args.push(Arg::B(key));
                args.extend(kept.iter().map(|v| Arg::B(v.as_slice())));
                self.ctx.replicate_many(c"RPUSH", &args);
                if let Some(at) = expiry {
                    self.ctx.replicate(c"PEXPIREAT", &[Arg::B(key), Arg::I(at)]);
                }
            }
        }
        self.notify_if_deleted(i);
        removed
    }

    pub(super) fn zset_len_(&mut self, key: &[u8]) -> Result<usize> {
        self.typed_len(key, KeyKind::Zset)
    }

    pub(super) fn zset_score_(&mut self, key: &[u8], member: &[u8]) -> Result<Option<f64>> {
        let m = self.name(member);
        Ok(self.typed(key, KeyKind::Zset)?.and_then(|k| k.key.zset_score(m.raw())))
    }

    /// Sets `member`'s score, firing `event`; true if the member is new.
    fn zset_put(&mut self, key: &[u8], member: &[u8], score: f64, event: &std::ffi::CStr) -> bool {
        let m = self.name(member);
        let i = self.slot(key);
        let k = &self.keys[i];
        if !matches!(k.key.kind(), KeyKind::Empty | KeyKind::Zset) {
            return false;
        }
        let new = k.key.zset_add(score, m.raw());
        with_score_text(score, |text| {
            self.effect(ZSET, event, k.name.raw(), c"ZADD", &[Arg::S(k.name.raw()), Arg::B(text), Arg::S(m.raw())]);
        });
        new
    }

    pub(super) fn zset_add_(&mut self, key: &[u8], member: &[u8], score: f64) -> bool {
        self.zset_put(key, member, score, c"zadd")
    }

    pub(super) fn zset_rem_(&mut self, key: &[u8], member: &[u8]) -> bool {
        let m = self.name(member);
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::Zset || !k.key.zset_rem(m.raw()) {
            return false;
        }
        self.effect(ZSET, c"zrem", k.name.raw(), c"ZREM", &[Arg::S(k.name.raw()), Arg::S(m.raw())]);
        self.notify_if_deleted(i);
        true
    }

    /// `ZREM key member...`: one event and one replicated command for all of them.
    pub(super) fn zset_rem_many_(&mut self, key: &[u8], members: &[&[u8]]) -> usize {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::Zset {
            return 0;
        }
        let mut args = Vec::with_capacity(1 + members.len());
        args.push(Arg::B(key));
        for m in members {
            let member = self.ctx.string(m);
            if k.key.zset_rem(member.as_ref()) {
                args.push(Arg::B(m));
            }
        }
        let removed = args.len() - 1;
        if removed > 0 {
            self.effect(ZSET, c"zrem", k.name.raw(), c"ZREM", &args);
            self.notify_if_deleted(i);
        }
        removed
    }

    pub(super) fn zset_incr_(&mut self, key: &[u8], member: &[u8], by: f64) -> f64 {
        let current = self.zset_score_(key, member).ok().flatten().unwrap_or(0.0);
        self.zset_put(key, member, current + by, c"zincr");
        current + by
    }

    pub(super) fn zset_shift_all_(&mut self, key: &[u8], by: f64) {
        let i = self.slot(key);
        let k = &self.keys[i];
        if k.key.kind() != KeyKind::Zset {
            return;
        }
        // The members come out of the zset as module strings: each one is used as it is for
        // the update and for the replicated `ZADD`, never copied.
        let members = k.key.zset_entries();
        let mut buf = crate::ffi::IntBuf::default();
        let mut score_string = |score: f64| match integral(score) {
            Some(n) => self.ctx.string(buf.format(n)),
            None => self.ctx.string(score_text(score).as_bytes()),
        };
        let scores: Vec<crate::ffi::RStr> = members.iter().map(|(_, s)| score_string(s + by)).collect();
        let mut args = Vec::with_capacity(1 + 2 * members.len());
        args.push(k.name.raw());
        for ((m, s), text) in members.iter().zip(&scores) {
            k.key.zset_add(s + by, m.as_ref());
            args.push(text.as_ref());
            args.push(m.as_ref());
        }
        if !members.is_empty() {
            // One event for the whole move (Redisson's loop fires one `zincr` per member; one
            // per key is what a notification user needs, at a fraction of the cost).
            // One `zincr` event for the whole move. Redisson's loop fires one per member; at
            // 10,000 waiters those events are a third of the grant's cost, and a notification
            // user learns the same thing (the deadlines changed) from one.
            self.notify(ZSET, c"zincr", k.name.raw());
            self.ctx.replicate_strs(c"ZADD", &args);
        }
    }

    pub(super) fn zset_incr_many_(&mut self, key: &[u8], by: &[(Vec<u8>, f64)]) {
        if by.is_empty() {
            return;
        }
        let i = self.slot(key);
        let k = &self.keys[i];
        if !matches!(k.key.kind(), KeyKind::Empty | KeyKind::Zset) {
            return;
        }
        let mut texts = Vec::with_capacity(by.len());
        for (m, d) in by {
            let member = self.ctx.string(m);
            let score = k.key.zset_score(member.as_ref()).unwrap_or(0.0) + d;
            k.key.zset_add(score, member.as_ref());
            // One event per member, as Redisson's loop of ZINCRBY fires.
            self.notify(ZSET, c"zincr", k.name.raw());
            texts.push(score_text(score));
        }
        // One ZADD with the absolute results: a replica ends up with the same scores.
        let mut args = Vec::with_capacity(1 + 2 * by.len());
        args.push(Arg::B(key));
        for ((m, _), text) in by.iter().zip(&texts) {
            args.push(Arg::B(text.as_bytes()));
            args.push(Arg::B(m));
        }
        self.ctx.replicate(c"ZADD", &args);
    }
}
