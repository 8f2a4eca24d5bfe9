//! A command's arguments and module strings: borrowed ([`StrRef`]) or owned ([`RStr`]).

use std::cell::OnceCell;
use std::collections::HashMap;
use std::os::raw::c_char;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use foldhash::fast::RandomState;

use redis_module::raw;

use super::{RawCtx, RawStr, OK};

/// How many arguments [`Args`] reads once, up front (every O(1) command has fewer).
const CACHED_ARGS: usize = 8;

/// Probes made looking a buffer up among the arguments past the first [`CACHED_ARGS`] (one per
/// lookup): a work counter, shown in `INFO lockmod` as `args_probed`, that tells a test that a
/// command of K arguments does O(K) lookups in all, not O(K) per lookup.
static PROBED: AtomicU64 = AtomicU64::new(0);

/// [`PROBED`] so far.
pub fn args_probed() -> u64 {
    PROBED.load(Relaxed)
}

/// `CONFIG RESETSTAT`.
pub fn reset_args_probed() {
    PROBED.store(0, Relaxed);
}

/// A command's arguments, `argv[0]` being the command name. The bytes of the first
/// [`CACHED_ARGS`] are read once: the store looks arguments up by address for every name it
/// hands Redis, and a call into Redis per comparison would cost more than the comparison.
pub struct Args<'a> {
    pub(super) argv: &'a [RawStr],
    bytes: [&'a [u8]; CACHED_ARGS],
    /// The arguments past the first [`CACHED_ARGS`], by the address of their buffer: built by
    /// the first lookup that gets that far. A command of K arguments (`PSEMAPHORE.RELEASE`
    /// with K ids) looks up O(K) names; a scan of the arguments for each was O(K^2).
    rest: OnceCell<HashMap<usize, usize, RandomState>>,
}

impl<'a> Args<'a> {
    pub(super) fn new(argv: &'a [RawStr]) -> Args<'a> {
        let mut bytes: [&'a [u8]; CACHED_ARGS] = [&[]; CACHED_ARGS];
        for (b, &s) in bytes.iter_mut().zip(argv) {
            *b = str_bytes(s);
        }
        Args { argv, bytes, rest: OnceCell::new() }
    }

    /// No arguments: for stores used outside a command (timers, blocked-client callbacks).
    pub fn empty() -> Args<'static> {
        Args { argv: &[], bytes: [&[]; CACHED_ARGS], rest: OnceCell::new() }
    }

    pub fn len(&self) -> usize {
        self.argv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.argv.is_empty()
    }

    /// The bytes of argument `i`, borrowed from Redis for the duration of the command.
    pub fn bytes(&self, i: usize) -> &'a [u8] {
        match (self.bytes.get(i), self.argv.get(i)) {
            (Some(b), _) if i < self.argv.len() => b,
            (_, Some(&s)) => str_bytes(s),
            _ => &[],
        }
    }

    /// The module string of argument `i`.
    pub fn raw(&self, i: usize) -> Option<StrRef<'a>> {
        self.argv.get(i).map(|&ptr| StrRef { ptr, _life: std::marker::PhantomData })
    }

    /// Argument `i` read as the server reads a float (`RM_StringToDouble`, Redis'
    /// `getDoubleFromObject`: no spaces, no NaN, no overflow); None when it is not one.
    pub fn double(&self, i: usize) -> Option<f64> {
        let s = *self.argv.get(i)?;
        let mut d = 0.0f64;
        // SAFETY: `s` is a live argument string and `d` a valid place for the result.
        (unsafe { api!(RedisModule_StringToDouble)(s, &mut d) } == OK).then_some(d)
    }

    /// The index of the argument whose own buffer `b` is (pointer identity, not equality).
    /// Lets the store hand Redis its own argv strings instead of allocating copies.
    pub fn index_of(&self, b: &[u8]) -> Option<usize> {
        let same = |own: &[u8]| own.as_ptr() == b.as_ptr() && own.len() == b.len();
        let cached = self.argv.len().min(CACHED_ARGS);
        if let Some(i) = self.bytes[..cached].iter().position(|own| same(own)) {
            return Some(i);
        }
        if self.argv.len() <= CACHED_ARGS {
            return None;
        }
        PROBED.store(PROBED.load(Relaxed).wrapping_add(1), Relaxed);
        let rest = self.rest.get_or_init(|| {
            let mut by_address = HashMap::with_capacity_and_hasher(self.argv.len() - cached, RandomState::default());
            for (i, &s) in self.argv.iter().enumerate().skip(cached) {
                by_address.insert(str_bytes(s).as_ptr() as usize, i);
            }
            by_address
        });
        // The address alone could be an empty argument's (a shared pointer): the length too.
        rest.get(&(b.as_ptr() as usize)).copied().filter(|&i| same(str_bytes(self.argv[i])))
    }

    /// The module string of the argument whose own buffer `b` is, if any.
    pub fn raw_of(&self, b: &[u8]) -> Option<RawStr> {
        self.index_of(b).map(|i| self.argv[i])
    }
}

pub(super) fn str_bytes<'a>(s: RawStr) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: `s` is a live module string; Redis returns a pointer to its `len` bytes, valid
    // until the string is freed, which for argv and our `RStr`s outlives every borrow.
    unsafe {
        let p = api!(RedisModule_StringPtrLen)(s, &mut len);
        if p.is_null() {
            return &[];
        }
        std::slice::from_raw_parts(p as *const u8, len)
    }
}

/// A module string known to be alive for `'a`: an argument of the running command, or an
/// [`RStr`] borrowed. The only way safe code hands a string to the C API.
#[derive(Clone, Copy)]
pub struct StrRef<'a> {
    pub(super) ptr: RawStr,
    _life: std::marker::PhantomData<&'a ()>,
}

impl<'a> StrRef<'a> {
    /// A string the caller knows to be alive for `'a`.
    pub(super) fn from_raw(ptr: RawStr) -> StrRef<'a> {
        StrRef { ptr, _life: std::marker::PhantomData }
    }

    pub fn bytes(&self) -> &'a [u8] {
        str_bytes(self.ptr)
    }

    /// The string's identity (its address), to recognise one of the module's own strings.
    pub fn id(&self) -> usize {
        self.ptr as usize
    }
}

/// An owned module string, freed on drop.
pub struct RStr {
    pub(super) ctx: RawCtx,
    pub(super) ptr: RawStr,
}

impl RStr {
    pub(super) fn new(ctx: RawCtx, bytes: &[u8]) -> RStr {
        // SAFETY: Redis copies `bytes`; the result is freed in `Drop` with the same context.
        let ptr = unsafe { api!(RedisModule_CreateString)(ctx, bytes.as_ptr() as *const c_char, bytes.len()) };
        RStr { ctx, ptr }
    }

    pub fn as_ref(&self) -> StrRef<'_> {
        StrRef { ptr: self.ptr, _life: std::marker::PhantomData }
    }

    pub fn bytes(&self) -> &[u8] {
        str_bytes(self.ptr)
    }
}

impl Drop for RStr {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: we own `ptr`, created with `ctx`, and free it exactly once.
            unsafe { api!(RedisModule_FreeString)(self.ctx, self.ptr) };
        }
    }
}

/// A value that should have been an integer was not.
#[derive(Debug)]
pub struct NotAnInteger;

/// Parses a module string as a signed 64-bit integer, as Redis does.
pub(super) fn str_to_i64(s: StrRef) -> Option<i64> {
    let mut v: i64 = 0;
    // SAFETY: `s` is a live module string and `v` a valid out-pointer.
    let ok = unsafe { api!(RedisModule_StringToLongLong)(s.ptr, &mut v) } == OK;
    ok.then_some(v)
}
