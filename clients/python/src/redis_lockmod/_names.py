"""Redisson's naming rules for the keys a lock derives from its name.

A derived key wraps the lock name in braces (``prefix:{name}``) so that it lands in the lock
key's Redis Cluster hash slot, unless the name already carries a hash tag (any ``{``), whose
own tag then decides the slot. The module applies the same rules (``src/names.rs``); the
library needs the token counter's name (to read a lost grant's token) and an unlock's latch
(to delete it once the unlock's reply arrived).
"""

from __future__ import annotations


def prefix(p: str, name: str) -> str:
    """``p:{name}``, or ``p:name`` when ``name`` already contains ``{``."""
    return f"{p}:{name}" if "{" in name else f"{p}:{{{name}}}"


def token_key(name: str) -> str:
    """The fencing-token counter of lock ``name`` (one per name, whatever the kind)."""
    return prefix("redisson_lock_token", name)


def latch_key(name: str, request_id: str) -> str:
    """The latch an unlock with ``LATCH <request_id>`` leaves for its re-sends."""
    return f"{prefix('redisson_unlock_latch', name)}:{request_id}"
