"""Runs one docs example (argv[1]) as a script, as ``python example.py`` would, after sending
every redis-py connection aimed at the default address (localhost or 127.0.0.1, port 6379) to
the test server's port, $DOCS_TEST_PORT, and those aimed at the default Sentinel port (26379)
to the test's sentinel, $DOCS_TEST_SENTINEL_PORT. The example itself is not edited: it keeps writing
``redis.Redis()``. Both redis-py connection classes are patched (sync and asyncio), so the
library's own connections, made from the client's settings, follow too.
"""

import os
import runpy
import sys

import redis.asyncio.connection
import redis.connection

PORT = int(os.environ["DOCS_TEST_PORT"])
SENTINEL_PORT = int(os.environ["DOCS_TEST_SENTINEL_PORT"])
DEFAULT_HOSTS = ("localhost", "127.0.0.1")
#: Default port -> the test's.
PORTS = {6379: PORT, 26379: SENTINEL_PORT}


def redirect(cls: type) -> None:
    init = cls.__init__

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        init(self, *args, **kwargs)
        if getattr(self, "port", None) in PORTS and getattr(self, "host", None) in DEFAULT_HOSTS:
            self.port = PORTS[self.port]

    cls.__init__ = __init__


redirect(redis.connection.Connection)
redirect(redis.asyncio.connection.Connection)

path = sys.argv[1]
sys.argv = [path]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
runpy.run_path(path, run_name="__main__")
