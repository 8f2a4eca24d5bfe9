//! The command filter's part that runs Redisson's lock scripts as native commands
//! (`lockmod.redisson-scripts native`): what its parts share (the module strings, the flags)
//! and the setup at load. The filter itself (one for the whole module) is `crate::ffi::filter`.
//!
//! The filter turns `EVALSHA sha n KEYS... ARGV...` (or `EVAL body ...`) of a recognised script
//! into `<native command> <arguments>` before Redis looks the command up, so the native
//! command's flags, key spec (cluster redirects), ACL and `INFO commandstats` apply. Its first
//! argument is one of the module's own strings, one per table row: a command recognises a
//! rewritten call, and its row, by pointer identity, which no client can forge.
//!
//! Every API the rewrite uses exists in Redis 7.0 except the filter's client id (7.2), without
//! which the filter cannot check the caller's ACL and rewrites only while no user of the server
//! is restricted at all (`crate::acl::all_users`); on a server missing any other the filter
//! never rewrites.
//!
//! `super::filter` rewrites a call, `crate::acl::script` checks the caller's ACL for it,
//! `super::dispatch` runs the calls it rewrote, `super::learn` notes what changes the script
//! cache (`super::cache`).

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::OnceLock;

use super::acl;
use super::rewrite;
use super::table::ROWS;
use crate::ffi::filter::{can_name_client, can_rewrite, make_detached, Owned};
use crate::ffi::{log, StrRef};

/// Module strings made once at load and never freed.
pub(super) struct Strings {
    /// Per table row, the native command's name for a rewritten `EVALSHA` (`None` for a row
    /// left to Lua), and the same text for a rewritten `EVAL`: a call whose script turns out
    /// not to be cached answers as its own form would (`NOSCRIPT`, or running the body).
    pub(super) markers: Vec<Option<Owned>>,
    pub(super) eval_markers: Vec<Option<Owned>>,
    /// Every marker's identity, sorted, with its row and whether it stands for `EVAL`.
    pub(super) lookup: Vec<(usize, usize, bool)>,
    /// The keywords of native arguments and the inner commands' names, for ACL checks.
    words: Vec<(&'static [u8], Owned)>,
    /// Per table row, an `EVAL` body seen (held), to run the script itself by `EVAL`.
    pub(super) bodies: Vec<OnceLock<Owned>>,
}

pub(super) static STRINGS: OnceLock<Strings> = OnceLock::new();
/// The server has every API the rewrite needs (set by [`register`]).
pub(super) static READY: AtomicBool = AtomicBool::new(false);
/// Set while the module runs a script itself (`super::dispatch`): that call must reach Lua,
/// not be rewritten back (what `REDISMODULE_CMDFILTER_NOSELF` did for a filter of its own; the
/// module's one filter must see its own calls for the read-hold index).
pub(super) static OWN_CALL: AtomicBool = AtomicBool::new(false);

const WORDS: &[&[u8]] = &[b"LATCH", b"TOKEN", b"READ", b"WRITE", b"NOQUEUE", b"1", b"LEASE"];

/// Prepares the rewrite, which the module's one command filter runs. A server lacking the
/// APIs it needs gets a log line, and `native` then changes nothing.
pub fn register(ctx: &redis_module::Context) -> bool {
    READY.store(false, Relaxed);
    if !can_rewrite() {
        log(c"warning", "lockmod: this server lacks the APIs lockmod.redisson-scripts needs; it has no effect");
        return true;
    }
    make_detached(ctx);
    if !can_name_client() {
        // Known before the first script, once the server has loaded its ACL users.
        crate::acl::probe::arm();
    }
    // Made once: after a MODULE UNLOAD and LOAD the earlier strings are still valid.
    STRINGS.get_or_init(|| {
        let made = || -> Vec<Option<Owned>> {
            ROWS.iter().map(|r| rewrite::native_of(r.kind).map(|n| Owned::new(n.name().as_bytes()))).collect()
        };
        let (markers, eval_markers) = (made(), made());
        let mut lookup: Vec<(usize, usize, bool)> = markers
            .iter()
            .enumerate()
            .map(|(row, m)| (m.as_ref().map_or(0, Owned::id), row, false))
            .chain(eval_markers.iter().enumerate().map(|(row, m)| (m.as_ref().map_or(0, Owned::id), row, true)))
            .filter(|(m, _, _)| *m != 0)
            .collect();
        lookup.sort_unstable();
        Strings {
            markers,
            eval_markers,
            lookup,
            words: WORDS
                .iter()
                .copied()
                .chain(acl::COMMANDS.iter().map(|c| c.as_bytes()))
                .map(|w| (w, Owned::new(w)))
                .collect(),
            bodies: ROWS.iter().map(|_| OnceLock::new()).collect(),
        }
    });
    READY.store(true, Relaxed);
    true
}

/// Logs that the caller's ACL cannot be checked here (Redis 7.0: a filter cannot learn the
/// calling user), and what that means.
pub fn warn_if_acl_blind() {
    if !can_name_client() {
        log(
            c"notice",
            "lockmod: redisson-scripts native on a server whose command filters cannot see the calling user \
             (Redis < 7.2): scripts run natively only while no ACL user is restricted (docs/configuration.md)",
        );
    }
}

/// What follows a set of `lockmod.redisson-scripts` (from `was` to `val`), handed to
/// `ffi::config` at load.
pub fn on_scripts_set(was: i32, val: i32) {
    if was != val {
        // The filter did not watch the script cache while `off`.
        super::cache::forget_all();
    }
    if val == crate::core::config::SCRIPTS_NATIVE {
        warn_if_acl_blind();
    }
}

impl Strings {
    /// The module string of a keyword or an inner command's name.
    pub(super) fn word(&self, w: &[u8]) -> Option<StrRef<'_>> {
        self.words.iter().find(|(k, _)| *k == w).map(|(_, s)| s.as_ref())
    }
}
