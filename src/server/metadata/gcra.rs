//! Command metadata of `GCRA` and `CL.THROTTLE`: data only, applied with the locks' rows
//! (`super::COMMANDS`), and only where this module registered the command (a server with its
//! own `GCRA` keeps its own metadata).
//!
//! Both declare their one key (first = last = 1), read and updated, as Redis' `GCRA` does
//! (`RW ACCESS UPDATE`).

use super::arg;
use crate::ffi::metadata::{Arg, ArgKind, Command, KeyAccess};

const KEY: Arg = arg("key", ArgKind::Key);
const MAX_BURST: Arg = arg("max_burst", ArgKind::Integer);
const TOKENS: Arg =
    Arg { name: "count", kind: ArgKind::Integer, token: Some("TOKENS"), optional: true, multiple: false, subargs: &[] };
const QUANTITY: Arg =
    Arg { name: "quantity", kind: ArgKind::Integer, token: None, optional: true, multiple: false, subargs: &[] };

#[rustfmt::skip]
pub static COMMANDS: &[Command] = &[
    Command {
        name: "GCRA",
        summary: "Rate limits by GCRA on one key (Redis' GCRA, for servers without it)",
        complexity: "O(1)",
        arity: -5,
        key: KeyAccess::ReadUpdate,
        acl: "write fast",
        args: &[KEY, MAX_BURST, arg("tokens_per_period", ArgKind::Integer), arg("period", ArgKind::Double), TOKENS],
    },
    Command {
        name: "CL.THROTTLE",
        summary: "Rate limits by GCRA on one key, with redis-cell's replies",
        complexity: "O(1)",
        arity: -5,
        key: KeyAccess::ReadUpdate,
        acl: "write fast",
        args: &[KEY, MAX_BURST, arg("count", ArgKind::Integer), arg("period", ArgKind::Integer), QUANTITY],
    },
];
