"""What the sync and asyncio rate limiters share: the ``RATELIMITER.*`` commands, their
arguments checked before anything is sent, and how to read their replies. No I/O here.

The commands are the module's (issue 30, docs/commands.md "Rate limiter"), on Redisson's
``RRateLimiter`` layout: the hash ``name`` (``rate``, ``interval``, ``type``,
``keepAliveTime``), ``{name}:value[:<client id>]`` and ``{name}:permits[:<client id>]``. Every
command but ``TRYSETRATE`` carries ``CLIENT <client id>``: a ``PER_CLIENT`` limiter uses that
client's window (an ``OVERALL`` one ignores it), as Redisson's bodies always get the
instance's per-client keys.
The client id is the library's client uuid, the one in every owner name, as Redisson uses its
instance id (``ServiceManager.getId()``) for both.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional, Tuple, Union

from ._kinds import Args, text
from ._sync import positive, with_block


class RateType(str, Enum):
    """Redisson's ``RateType``: one window for every client, or one per client id."""

    OVERALL = "OVERALL"
    PER_CLIENT = "PER_CLIENT"


#: The ``type`` field of the limiter's hash -> its `RateType`.
_TYPE_FIELD = {"0": RateType.OVERALL, "1": RateType.PER_CLIENT}


@dataclass(frozen=True)
class RateLimiterConfig:
    """The settings in the limiter's hash (Redisson's ``RateLimiterConfig``, with the
    keep-alive Redisson 3.38+ writes; 0 when none)."""

    mode: RateType
    rate: int
    interval_ms: int
    keep_alive_ms: int


def rate_type(mode: Union[RateType, str]) -> RateType:
    """`RateType`, or its name in any case (``"overall"``, ``"PER_CLIENT"``)."""
    if isinstance(mode, RateType):
        return mode
    if isinstance(mode, str):
        try:
            return RateType(mode.upper())
        except ValueError:
            pass
    raise ValueError(f"a rate type is RateType.OVERALL or RateType.PER_CLIENT, not {mode!r}")


def settings(
    name: str, mode: Union[RateType, str], rate: int, interval_ms: int, keep_alive_ms: Optional[int]
) -> Tuple[Any, ...]:
    """``name OVERALL|PER_CLIENT rate interval_ms [KEEPALIVE ms]``, checked as Redisson checks
    them (a keep-alive shorter than the interval is refused)."""
    args: Tuple[Any, ...] = (name, rate_type(mode).value, positive(rate, "rate"), positive(interval_ms, "interval_ms"))
    if keep_alive_ms is None or keep_alive_ms == 0:
        return args
    if positive(keep_alive_ms, "keep_alive_ms") < interval_ms:
        raise ValueError("keep_alive_ms must be at least interval_ms (Redisson's rule)")
    return (*args, "KEEPALIVE", keep_alive_ms)


class RateArgs:
    """``RATELIMITER.*`` (Redisson's ``RRateLimiter``)."""

    @staticmethod
    def try_set(name: str, mode: Union[RateType, str], rate: int, interval_ms: int, keep_alive_ms: Optional[int]) -> Args:
        return ("RATELIMITER.TRYSETRATE", *settings(name, mode, rate, interval_ms, keep_alive_ms))

    @staticmethod
    def set(
        name: str,
        client_id: str,
        mode: Union[RateType, str],
        rate: int,
        interval_ms: int,
        keep_alive_ms: Optional[int],
        keep_state: bool,
        xx: bool,
    ) -> Args:
        flags = (("KEEPSTATE",) if keep_state else ()) + (("XX",) if xx else ())
        return ("RATELIMITER.SETRATE", *settings(name, mode, rate, interval_ms, keep_alive_ms), *flags, "CLIENT", client_id)

    @staticmethod
    def acquire(name: str, client_id: str, permits: int, block_ms: Optional[int]) -> Args:
        return with_block(("RATELIMITER.ACQUIRE", name, positive(permits, "permits"), "CLIENT", client_id), block_ms)

    @staticmethod
    def release(name: str, client_id: str, permits: int) -> Args:
        return ("RATELIMITER.RELEASE", name, positive(permits, "permits"), "CLIENT", client_id)

    @staticmethod
    def available(name: str, client_id: str) -> Args:
        return ("RATELIMITER.AVAILABLE", name, "CLIENT", client_id)

    @staticmethod
    def give_back(name: str, client_id: str, permits: int, reply: Any) -> Optional[Args]:
        """The release of what an acquire was granted (nil: granted), None for a refusal."""
        return RateArgs.release(name, client_id, permits) if reply is None else None


def parse_config(reply: Any) -> Optional[RateLimiterConfig]:
    """``HGETALL name`` (a flat list, or a dict under RESP3) as the limiter's settings; None
    when the limiter is not set (Redisson's ``getConfig`` would then say OVERALL, 0, 0)."""
    items = reply.items() if isinstance(reply, dict) else zip(reply[::2], reply[1::2])
    fields = {text(k): text(v) for k, v in items}
    if not {"rate", "interval", "type"} <= fields.keys():
        return None
    mode = _TYPE_FIELD.get(fields["type"] or "")
    if mode is None:
        raise ValueError(f"rate limiter type field is {fields['type']!r}, not 0 or 1")
    return RateLimiterConfig(mode, int(fields["rate"]), int(fields["interval"]), int(fields.get("keepAliveTime") or 0))
