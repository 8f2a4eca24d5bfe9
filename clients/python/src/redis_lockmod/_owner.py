"""Owner ids in Redisson's form ``<client uuid>:<thread id>``.

Redisson's lock is reentrant per thread: the owner is the client instance's uuid and the
thread's id. Here the "thread id" is a number given to each thread (and, for asyncio, to each
task) the first time it asks, never reused in the process: an OS thread ident can be reused
once a thread ends, and a new thread must not re-enter a lock a dead one left held.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import weakref

_ids = itertools.count(1)
_ids_mutex = threading.Lock()
_local = threading.local()
_task_ids: "weakref.WeakKeyDictionary[asyncio.Task[object], int]" = weakref.WeakKeyDictionary()


def _next_id() -> int:
    with _ids_mutex:
        return next(_ids)


def thread_id() -> int:
    """This thread's id for owner names, stable for the thread's life."""
    tid = getattr(_local, "tid", None)
    if tid is None:
        tid = _next_id()
        _local.tid = tid
    return tid


def task_id() -> int:
    """The current asyncio task's id for owner names: each task is its own owner."""
    task = asyncio.current_task()
    if task is None:
        raise RuntimeError("redis_lockmod.asyncio locks must be used from inside an asyncio task")
    tid = _task_ids.get(task)
    if tid is None:
        tid = _next_id()
        _task_ids[task] = tid
    return tid
