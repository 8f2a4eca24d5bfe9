//! Who may touch what: the caller of a command and the checks of its ACL beyond the lock key
//! (`caller`), what is known of the server's ACL between two changes (`known`, `tracked`),
//! whether every user is unrestricted (`all_users`, for a filter that cannot name its
//! client), how a user's rules read (`rules`), and the ACL checks of a rewritten Redisson
//! script call (`script`).
//!
//! The derived keys and channels each command touches are listed in `crate::core::access`:
//! the lock algorithms declare them as they go (`Store::permit`), so that list lies below
//! them, in `core`; this module checks callers against it.
//!
//! May import: ffi, core. Imported by effects, blocking, redisson, server.

pub mod all_users;
pub mod caller;
pub mod known;
pub mod probe;
pub mod rules;
pub mod script;
pub mod tracked;

pub use caller::{Access, Who};
pub use known::{forget_all, on_command};
pub use tracked::{set_tracked, tracked};
