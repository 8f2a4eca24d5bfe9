//! redis-lockmod: Redisson's locks as native Redis commands.
//!
//! This file declares the modules; Redis enters through `server` (its `OnLoad` registers
//! everything). Floors, from the top; a module imports only modules below it
//! (`scripts/check-layers.py` checks it, and that no two files import each other around):
//!
//! | floor | module     | owns                                                            |
//! |-------|------------|-----------------------------------------------------------------|
//! | 8     | `server`   | registration, configs, command metadata, version, `INFO`        |
//! | 7     | `commands` | one file per kind: parse, call the core, reply                  |
//! | 6     | `redisson` | Redisson's scripts run natively: table, rewrite, dispatch       |
//! | 5     | `blocking` | parked clients, timeouts, disconnects, FIFO hand-off            |
//! | 5     | `fencing`  | fencing eras: events, the walk that moves counters, the filter  |
//! | 4     | `effects`  | the write chokepoint: write, propagate, publish, signal, count  |
//! | 3     | `watch`    | what other clients' commands change: key tests, read-hold index |
//! | 3     | `acl`      | who may touch what: the caller, ACL verdicts                    |
//! | 2     | `ffi`      | the module C API, the only code calling C; callbacks handed in  |
//! | 1     | `core`     | pure algorithms over a `Store`, Redisson's names; no Redis      |

pub mod acl;
pub mod blocking;
pub mod commands;
pub mod core;
pub mod effects;
pub mod fencing;
pub mod ffi;
pub mod redisson;
pub mod server;
pub mod watch;
