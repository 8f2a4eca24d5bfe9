//! Propagation to replicas and the AOF: `RedisModule_Replicate` with literal formats per arity
//! on the hot path, argv vectors otherwise.

use std::ffi::CStr;
use std::os::raw::c_char;

use redis_module::raw;

use super::reply::itoa_buf;
use super::{Args, Ctx, RStr, RawStr, StrRef, OK};

/// An argument of a propagated command.
pub enum Arg<'a> {
    B(&'a [u8]),
    I(i64),
    /// A module string the caller already has (the key's name, a value it just wrote):
    /// handed to Redis as it is, a reference count rather than a copy.
    S(StrRef<'a>),
}

impl Ctx {
    /// Appends `cmd args...` to the replication stream and the AOF.
    pub fn replicate(&self, cmd: &CStr, args: &[Arg]) {
        let mut ints: [itoa_buf::Buf; 8] = Default::default();
        let mut parts: [&[u8]; 8] = [&[]; 8];
        if args.len() > parts.len() {
            return self.replicate_many(cmd, args);
        }
        for ((part, buf), a) in parts.iter_mut().zip(ints.iter_mut()).zip(args) {
            *part = match a {
                Arg::B(b) => b,
                Arg::I(n) => buf.format(*n),
                Arg::S(s) => s.bytes(),
            };
        }
        let f = api!(RedisModule_Replicate);
        let c = cmd.as_ptr();
        let p = |i: usize| parts[i].as_ptr() as *const c_char;
        let l = |i: usize| parts[i].len();
        // SAFETY: each "b" directive consumes a (pointer, length) pair of a live buffer; Redis
        // copies them before returning. Variadic calls need a literal format per arity.
        unsafe {
            match args.len() {
                1 => f(self.0, c, c"b".as_ptr(), p(0), l(0)),
                2 => f(self.0, c, c"bb".as_ptr(), p(0), l(0), p(1), l(1)),
                3 => f(self.0, c, c"bbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2)),
                4 => f(self.0, c, c"bbbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2), p(3), l(3)),
                5 => f(self.0, c, c"bbbbb".as_ptr(), p(0), l(0), p(1), l(1), p(2), l(2), p(3), l(3), p(4), l(4)),
                6 => f(
                    self.0,
                    c,
                    c"bbbbbb".as_ptr(),
                    p(0),
                    l(0),
                    p(1),
                    l(1),
                    p(2),
                    l(2),
                    p(3),
                    l(3),
                    p(4),
                    l(4),
                    p(5),
                    l(5),
                ),
                _ => {
                    self.replicate_many(cmd, args);
                    OK
                }
            };
        }
    }

    /// `replicate`, handing Redis module strings: the caller's own ([`Arg::S`]) or the
    /// command's own argument strings (found in `argv` by address) where it can, so that on the
    /// O(1) paths most arguments cost a reference count rather than an allocation.
    pub fn replicate_reusing(&self, argv: &Args, cmd: &CStr, args: &[Arg]) {
        const MAX: usize = 8;
        if args.len() > MAX {
            return self.replicate_many(cmd, args);
        }
        let mut raws: [RawStr; MAX] = [std::ptr::null_mut(); MAX];
        // Strings created here, freed after the call (Redis keeps its own references).
        let mut made: [RawStr; MAX] = [std::ptr::null_mut(); MAX];
        let mut n_made = 0;
        let mut buf = itoa_buf::Buf::default();
        for (raw, a) in raws.iter_mut().zip(args) {
            let bytes = match a {
                Arg::S(s) => {
                    *raw = s.ptr;
                    continue;
                }
                Arg::B(b) => match argv.raw_of(b) {
                    Some(r) => {
                        *raw = r;
                        continue;
                    }
                    None => *b,
                },
                Arg::I(n) => match super::shared::shared_int(*n) {
                    // A step of one, a first count: a reference count, not a string.
                    Some(s) => {
                        *raw = s.ptr;
                        continue;
                    }
                    None => buf.format(*n),
                },
            };
            // SAFETY: Redis copies `bytes`; the string is freed below with the same context.
            *raw = unsafe { api!(RedisModule_CreateString)(self.0, bytes.as_ptr() as *const c_char, bytes.len()) };
            made[n_made] = *raw;
            n_made += 1;
        }
        let f = api!(RedisModule_Replicate);
        let (c, r) = (cmd.as_ptr(), &raws);
        // SAFETY: each "s" consumes one RedisModuleString *, "v" a (RedisModuleString **,
        // size_t): the first `args.len()` entries are live strings (argv outlives the command,
        // the `S` strings the call, `made` until freed below); Redis takes its own references
        // to what it keeps. One "s" per argument saves the reallocation "v" costs inside Redis.
        unsafe {
            match args.len() {
                1 => f(self.0, c, c"s".as_ptr(), r[0]),
                2 => f(self.0, c, c"ss".as_ptr(), r[0], r[1]),
                3 => f(self.0, c, c"sss".as_ptr(), r[0], r[1], r[2]),
                4 => f(self.0, c, c"ssss".as_ptr(), r[0], r[1], r[2], r[3]),
                5 => f(self.0, c, c"sssss".as_ptr(), r[0], r[1], r[2], r[3], r[4]),
                n => f(self.0, c, c"v".as_ptr(), raws.as_ptr(), n),
            };
            for &m in &made[..n_made] {
                api!(RedisModule_FreeString)(self.0, m);
            }
        }
    }

    /// `replicate` for any number of arguments (the O(N) paths), through an argv vector.
    pub fn replicate_many(&self, cmd: &CStr, args: &[Arg]) {
        let mut buf = itoa_buf::Buf::default();
        let owned: Vec<RStr> = args
            .iter()
            .map(|a| match a {
                Arg::B(b) => self.string(b),
                Arg::I(n) => self.string(buf.format(*n)),
                Arg::S(s) => self.string(s.bytes()),
            })
            .collect();
        let mut raws: Vec<RawStr> = owned.iter().map(|s| s.ptr).collect();
        // SAFETY: "v" consumes (RedisModuleString **, size_t); Redis retains what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), raws.len());
        }
    }

    /// `replicate` with every argument already a module string (the O(N) paths that have
    /// them at hand: no copy per argument).
    pub fn replicate_strs(&self, cmd: &CStr, args: &[StrRef]) {
        let mut raws: Vec<RawStr> = args.iter().map(|s| s.ptr).collect();
        // SAFETY: "v" consumes (RedisModuleString **, size_t) of live strings (each `StrRef` is
        // alive for the call); Redis retains what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), raws.len());
        }
    }
}
