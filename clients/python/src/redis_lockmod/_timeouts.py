"""Timeouts in seconds, as callers give them, checked and turned into what is sent: the
server's ``BLOCK`` in ms and the socket timeout of the request.

The rules, the same for every lock, semaphore, latch and rate limiter (sync and asyncio):

- ``None`` waits without limit, and so do ``-1`` (as ``threading.Lock.acquire``), infinity,
  and anything above `NO_LIMIT_S` (about 31.7 years): ``BLOCK 0``, no socket timeout. Nothing
  overflows: a socket timeout above about 2**33 s does not fit the platform's ``time_t``.
- ``0`` (or ``blocking=False``) tries once.
- A positive number waits that long (rounded up to whole ms), the socket getting the command
  timeout on top.
- ``NaN``, another negative number, or a ``bool`` is a `ValueError`; anything but an ``int`` or
  a ``float`` a `TypeError`. Nothing is sent then.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Tuple

#: Waits longer than this many seconds (about 31.7 years) are waits without limit.
NO_LIMIT_S = 1e9


def seconds(value: Any, what: str = "timeout") -> Optional[float]:
    """`value` as a wait in seconds: None for no limit, else a finite number >= 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds or None, not {value!r}")
    if math.isnan(value):
        raise ValueError(f"{what} must be a number of seconds or None, not NaN")
    if value == -1 or value > NO_LIMIT_S:
        return None
    if value < 0:
        raise ValueError(f"{what} must be >= 0 (seconds), -1 or None (no limit), not {value!r}")
    return float(value)


def command_seconds(value: Any) -> float:
    """A command's socket timeout: a positive number of seconds, at most `NO_LIMIT_S`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= NO_LIMIT_S:
        raise ValueError(f"command_timeout must be a number of seconds in (0, {NO_LIMIT_S:g}], not {value!r}")
    return float(value)


def wait(blocking: bool, timeout: Any, command_timeout: float) -> Tuple[Optional[int], Optional[float]]:
    """(``BLOCK`` ms, or None to try once; the socket timeout, None without limit) of a wait."""
    limit = seconds(timeout)
    if not blocking:
        return None, command_timeout
    if limit is None:
        return 0, None
    if limit == 0:
        return None, command_timeout
    return max(1, math.ceil(limit * 1000)), limit + command_timeout
