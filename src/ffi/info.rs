//! The `INFO lockmod` section: its fields come from the function handed in at load
//! (`crate::server`), plus what this floor knows itself (the keyspace subscriptions, the way
//! parked clients are answered).

use std::os::raw::c_int;
use std::panic::catch_unwind;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use redis_module::raw;

/// The section's integer fields, in order (Redis prefixes each with `lockmod_`).
pub type InfoFields = fn() -> Vec<(&'static str, i64)>;

/// The section's dictionary fields, after the integer ones: `lockmod_<name>:a=1,b=2`, as Redis'
/// own `errorstat_*` and `latency_percentiles_usec_*` lines.
pub type InfoDicts = fn() -> Vec<(&'static str, Vec<(&'static str, i64)>)>;

static FIELDS: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());
static DICTS: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Registers the INFO section, filled by `fields` then `dicts`. False if Redis refused.
pub fn register(ctx: &redis_module::Context, fields: InfoFields, dicts: InfoDicts) -> bool {
    FIELDS.store(fields as *mut (), Relaxed);
    DICTS.store(dicts as *mut (), Relaxed);
    raw::register_info_function(ctx.ctx, Some(on_info)) == raw::Status::Ok
}

fn fields() -> Option<(InfoFields, InfoDicts)> {
    let (f, d) = (FIELDS.load(Relaxed), DICTS.load(Relaxed));
    // SAFETY: set only by `register`, from function pointers of types `InfoFields` and
    // `InfoDicts` respectively.
    (!f.is_null() && !d.is_null()).then(|| unsafe {
        (std::mem::transmute::<*mut (), InfoFields>(f), std::mem::transmute::<*mut (), InfoDicts>(d))
    })
}

extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    let Some((f, d)) = fields() else { return };
    let Ok(fields) = catch_unwind(f) else { return };
    let Ok(dicts) = catch_unwind(d) else { return };
    // A section named after the module: `INFO lockmod`.
    if raw::add_info_section(ctx, None) != raw::Status::Ok {
        return;
    }
    for (name, value) in fields {
        raw::add_info_field_long_long(ctx, name, value);
    }
    for (name, entries) in dicts {
        if raw::add_info_begin_dict_field(ctx, name) != raw::Status::Ok {
            continue;
        }
        for (entry, value) in entries {
            raw::add_info_field_long_long(ctx, entry, value);
        }
        raw::add_info_end_dict_field(ctx);
    }
    // What the module subscribes to, so a test (or an operator) can check that ordinary
    // writes never call into it.
    let events = std::ffi::CString::new(super::events::keyspace_subscriptions()).unwrap_or_default();
    // SAFETY: live INFO context; Redis copies both strings.
    unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, c"keyspace_subscriptions".as_ptr(), events.as_ptr()) };
    // How parked clients are answered on this server (`answers_due`).
    let order = std::ffi::CString::new(super::answers_due::answer_order_name()).unwrap_or_default();
    // SAFETY: live INFO context; Redis copies both strings.
    unsafe { api!(RedisModule_InfoAddFieldCString)(ctx, c"answer_order".as_ptr(), order.as_ptr()) };
}
