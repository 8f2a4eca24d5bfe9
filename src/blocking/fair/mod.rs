//! Parked fair-lock clients, one family: the fair lock is the one kind whose waiters hold a
//! place in the keyspace (its queue and their deadlines), so its parked clients need upkeep
//! of their own. [`queue`] reads the queue as the keyspace has it (who is first in line, which
//! lock a queue key belongs to); [`waiters`] keeps each parked waiter's place alive and gives
//! it up when the waiter leaves.

pub mod queue;
pub mod waiters;
