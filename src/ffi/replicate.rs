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

    /// `replicate`, handing Redis the command's own argument strings (found in `argv` by
    /// pointer identity) instead of copies: on the O(1) paths a lock's name and owner are
    /// argv strings, so most arguments cost a reference count rather than an allocation.
    pub fn replicate_reusing(&self, argv: &Args, cmd: &CStr, args: &[Arg]) {
        const MAX: usize = 8;
        if args.len() > MAX {
            return self.replicate_many(cmd, args);
        }
        // Each argument's own string, looked up once.
        let mut raws: [RawStr; MAX] = [std::ptr::null_mut(); MAX];
        for (raw, a) in raws.iter_mut().zip(args) {
            if let Arg::B(b) = a {
                if let Some(i) = argv.index_of(b) {
                    *raw = argv.argv[i];
                }
            }
        }
        if raws[..args.len()].iter().all(|r| r.is_null()) {
            return self.replicate(cmd, args);
        }
        let mut buf = itoa_buf::Buf::default();
        let mut owned: [Option<RStr>; MAX] = Default::default();
        for ((raw, own), a) in raws.iter_mut().zip(owned.iter_mut()).zip(args) {
            if raw.is_null() {
                *raw = own
                    .insert(match a {
                        Arg::B(b) => self.string(b),
                        Arg::I(n) => self.string(buf.format(*n)),
                    })
                    .ptr;
            }
        }
        // SAFETY: "v" consumes (RedisModuleString **, size_t): the first `args.len()` entries
        // are live strings (argv outlives the command, `owned` outlives the call); Redis takes
        // its own references to what it keeps.
        unsafe {
            api!(RedisModule_Replicate)(self.0, cmd.as_ptr(), c"v".as_ptr(), raws.as_mut_ptr(), args.len());
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
