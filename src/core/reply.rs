//! What a lock operation answers: the [`Reply`] a command writes, the [`Result`] every
//! operation returns, and what an acquire did ([`Acquired`]).

use super::error::LockError;

pub type Result<T> = std::result::Result<T, LockError>;

/// A command's reply, written to the client by the command layer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Nil,
    Int(i64),
    Bulk(Vec<u8>),
    Simple(String),
    Array(Vec<Reply>),
    /// A map under RESP3, a flat field/value array under RESP2.
    Map(Vec<(Reply, Reply)>),
    /// An error line, code first (for replies decided outside a command, e.g. a BLOCK grant).
    Error(String),
}

/// What an acquire attempt did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// First hold taken.
    New,
    /// Another hold taken by the owner that already held the lock.
    Reentered,
    /// Held by someone else; the lock's PTTL.
    Refused(i64),
}

impl Acquired {
    /// Redisson's reply: nil when acquired, else the PTTL.
    pub fn reply(self) -> Reply {
        match self {
            Acquired::New | Acquired::Reentered => Reply::Nil,
            Acquired::Refused(ttl) => Reply::Int(ttl),
        }
    }
}

// Test code only (never in the module): a missing field is how a test reports failure.
#[cfg(test)]
impl Reply {
    /// The value of field `name` of a map reply (the `*.INFO` and `LOCK.CONTENDED` tests).
    pub fn field(&self, name: &str) -> &Reply {
        match self {
            Reply::Map(m) => &m.iter().find(|(k, _)| *k == Reply::Bulk(name.as_bytes().to_vec())).expect("field").1,
            _ => panic!("not a map: {self:?}"),
        }
    }
}
