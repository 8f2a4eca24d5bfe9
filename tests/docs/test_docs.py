"""Every code example of the documentation, run as written against a real server.

``make test-docs`` (part of ``make test``) runs this with pytest. It reads every fenced block of
README.md, docs/*.md and clients/*/README.md and, by the block's language (the first word of
its info string):

- ``python``: saved as a script and run with this interpreter (the repository's .venv, where
  ``make`` installs the package) as ``python example.py``, through tests/docs/prelude.py,
  which sends redis-py's connections for the default address (localhost:6379) to the test
  server's port. The process must exit 0 within PY_TIMEOUT seconds, with nothing on stderr.
- ``js``, ``javascript``, ``mjs``: saved as ``example.mjs`` (``example.cjs`` when it only uses
  ``require``) in a directory whose node_modules links ``redis-lockmod`` to clients/node and
  ``ioredis`` to clients/node's own (``npm ci``), as ``npm install ioredis ./clients/node``
  would, and run as ``node example.mjs`` with tests/docs/preload.cjs, which sets ioredis'
  default port to the test server's. It must exit 0 **by itself** within NODE_TIMEOUT seconds
  (an example that leaves a connection open never exits: issue 25), with nothing on stderr.
- ``redis-cli``: a transcript. A command is a line ``$ redis-cli ARGS`` (run by bash, as typed
  in a shell: quotes, ``# comments``; ``redis-cli`` is given ``-p PORT --no-raw``, the output
  of a terminal) or ``redis> ARGS`` (also ``127.0.0.1:6379> ARGS``: fed to ``redis-cli`` as
  typed at its prompt). The lines after a command, up to the next one, are its printed reply,
  compared with the real one (below). A command printed without a reply must not reply an
  error. Each command must answer within CLI_TIMEOUT seconds.
- Languages that are not run (NOT_RUN: ``sh``, ``text``, ``conf``, ...) are skipped by
  language. Any other language, and a block without one, fails: say what a block is.

How printed replies are compared: token by token (the ``n)`` array indexes and each scalar),
exactly, except for times, which no example can print exactly:

- A **duration** in ms matches any value in ``(0, B]``, where B is the printed value rounded up
  at its leading digit (28113 -> 30000, 4890 -> 5000): an example prints "about 28 s left of a
  30 s lease", and a fast test sees 29999, so "(0, printed]" would fail every example printed
  the way a user sees it. A duration is: the reply of ``PTTL``/``TTL``; the first scalar of
  the reply of an acquire (``LOCK.ACQUIRE``, ``RWLOCK.RLOCK``, ``RWLOCK.WLOCK``,
  ``FAIRLOCK.ACQUIRE``: the refused lock's TTL, or ``[ttl, -1]`` with ``TOKEN``) unless
  printed as -1; an integer that follows a field name ``pttl``, ``ttl`` or ``*_ms`` (``LOCK.INFO``).
- The elements of a reply in no particular order (``KEYS``, ``SMEMBERS``, ...) match in any
  order.
- An **absolute time** (a 13-digit number, integer or string: ms since the epoch, as a fair
  waiter's deadline in ``redisson_lock_timeout:{key}``) matches any value within an hour of now.

Markers, on the line right before a block's opening fence (invisible once rendered):

- ``<!-- docs-test: skip (why) -->``: the block is not run (the reason is mandatory).
- ``<!-- docs-test: continues -->``: the block continues the previous runnable block of the same
  file: the server is not flushed in between (a section's examples meant to run in sequence).

Every other block runs on a fresh state: before it, the server is flushed (``FLUSHALL``,
``SCRIPT FLUSH``), ACL users other than ``default`` are deleted and the ``lockmod.*`` configs are
set back to what they were at start.

A block that needs something outside (a storage to write to) marks that one line with a
trailing ``# docs-test: CODE`` (Python) or ``// docs-test: CODE`` (JavaScript): the test runs
CODE in its place, with the line's indentation; nothing else of the block is changed. At most
one such line per block.

A Sentinel watches the test server as ``mymaster`` (one sentinel, quorum 1): an example that
asks the default Sentinel address (localhost:26379) for ``mymaster`` reaches it unedited (the
prelude and the preload send that port to it, ``$DOCS_TEST_SENTINEL_PORT``), and is handed the
test server as the primary.

Nothing is skipped silently: a missing server, module, ``redis-cli``, ``node`` or npm install
fails. The server is ``$REDIS_SERVER``, else ``SERVER=redis|redis8|valkey`` as scripts/server-bin.sh
finds it; the module ``$LOCKMOD_MODULE``, else target/debug. Each Python or Node example must
also open a connection to the test server (``total_connections_received`` grows), so one that
went to another server on 6379 fails.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

import pytest
import redis

ROOT = Path(__file__).resolve().parents[2]
# The Python client suite's harness helpers: which server and module, free ports.
sys.path.insert(0, str(ROOT / "clients" / "python" / "tests"))
from servers import free_port, module_path, server_binary  # noqa: E402
HERE = Path(__file__).resolve().parent

RUN_PYTHON = {"python", "py"}
RUN_JS = {"js", "javascript", "mjs"}
RUN_CLI = {"redis-cli"}
NOT_RUN = {"sh", "bash", "shell", "console", "text", "conf", "ini", "toml", "json", "yaml", "rust", "lua", "diff", "c"}

PY_TIMEOUT = 30
NODE_TIMEOUT = 10
CLI_TIMEOUT = 10

#: Lines that are redis-cli transcripts, wherever they are.
TRANSCRIPT_LINE = re.compile(r"^\s*(\$ redis-cli\b|redis> |[\w.-]+:\d+> )")
PROMPT = re.compile(r"^(?:redis|[\w.-]+:\d+)> (.*)$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*(.*?)\s*$")
REPLACE = {"python": re.compile(r"^(\s*).*?#\s*docs-test:\s*(.+?)\s*$"), "js": re.compile(r"^(\s*).*?//\s*docs-test:\s*(.+?)\s*$")}

TTL_COMMANDS = {"PTTL", "TTL"}
ACQUIRE_COMMANDS = {"LOCK.ACQUIRE", "RWLOCK.RLOCK", "RWLOCK.WLOCK", "FAIRLOCK.ACQUIRE"}
#: Commands whose reply is a set: compared in any order.
UNORDERED = {"KEYS", "SMEMBERS", "SUNION", "SINTER", "SDIFF"}


def doc_files() -> List[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "clients").glob("*/README.md"))]
    return [f for f in files if f.is_file()]


@dataclass
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: Optional[str] = None  # the marker line's directive, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> Optional[str]:
        if self.lang in RUN_PYTHON:
            return "python"
        if self.lang in RUN_JS:
            return "js"
        if self.lang in RUN_CLI:
            return "redis-cli"
        return None

    @property
    def skip_reason(self) -> Optional[str]:
        if self.marker and self.marker.startswith("skip"):
            return self.marker[4:].strip(" :()") or None
        return None

    @property
    def continues(self) -> bool:
        return self.marker == "continues"


@dataclass
class Parsed:
    blocks: List[Block] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)


def parse(path: Path) -> Parsed:
    """The fenced blocks of one file, and what breaks the conventions above."""
    out = Parsed()
    lines = path.read_text().split("\n")
    rel = path.relative_to(ROOT)
    i = 0
    pending: Optional[Tuple[int, str]] = None  # a marker: its line and directive
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            mm = MARKER.match(lines[i])
            if mm:
                if pending:
                    out.problems.append(f"{rel}:{pending[0]}: a docs-test marker not followed by a block")
                pending = (i + 1, mm.group(1))
            else:
                if pending and lines[i].strip():
                    out.problems.append(f"{rel}:{pending[0]}: a docs-test marker must be on the line right before a block's fence")
                    pending = None
                if TRANSCRIPT_LINE.match(lines[i]):
                    out.problems.append(f"{rel}:{i + 1}: a redis-cli transcript outside a ```redis-cli block: {lines[i].strip()}")
            i += 1
            continue
        indent, fence, info = m.groups()
        start = i
        i += 1
        body: List[str] = []
        while i < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            out.problems.append(f"{rel}:{start + 1}: a fence that is never closed")
        i += 1
        lang = info.split()[0].lower() if info else ""
        marker = None
        if pending:
            marker = pending[1]
            pending = None
        block = Block(path, start + 1, lang, "\n".join(body) + "\n", marker)
        out.blocks.append(block)
        where = block.where
        if not lang:
            out.problems.append(f"{where}: a block without a language: ```redis-cli, ```python, ```js, or ```text (not run)")
        elif block.kind is None and lang not in NOT_RUN:
            out.problems.append(f"{where}: language {lang!r} is neither run nor known not to run (tests/docs/test_docs.py)")
        if block.kind != "redis-cli":
            for n, line in enumerate(body):
                if TRANSCRIPT_LINE.match(line):
                    out.problems.append(f"{where}: a redis-cli transcript line in a ```{lang} block (line {start + 2 + n}): ```redis-cli")
                    break
        if marker is not None and not (marker == "continues" or (marker.startswith("skip") and block.skip_reason)):
            out.problems.append(f"{where}: unknown docs-test marker {marker!r} (skip (why) | continues)")
        if marker is not None and block.kind is None:
            out.problems.append(f"{where}: a docs-test marker on a block that is not run anyway")
        if block.kind in ("python", "js"):
            pattern = REPLACE[block.kind]
            if len([ln for ln in body if pattern.match(ln)]) > 1:
                out.problems.append(f"{where}: more than one `docs-test:` line")
        elif block.kind == "redis-cli" and "docs-test:" in block.code:
            out.problems.append(f"{where}: a `docs-test:` line in a block that cannot have one")
    if pending:
        out.problems.append(f"{rel}:{pending[0]}: a docs-test marker not followed by a block")
    return out


PARSED = {p: parse(p) for p in doc_files()}


def chains() -> List[List[Block]]:
    """The runnable blocks, grouped: a block marked `continues` joins the previous chain of its
    file (the server is flushed once, before the chain's first block)."""
    out: List[List[Block]] = []
    for parsed in PARSED.values():
        last: Optional[List[Block]] = None
        for b in parsed.blocks:
            if b.kind is None or b.skip_reason:
                continue
            if b.continues and last is not None:
                last.append(b)
            else:
                last = [b]
                out.append(last)
    return out


CHAINS = chains()
#: What ran, per language, printed at the end (conftest.py).
RAN: Counter = Counter()


# -- the server ---------------------------------------------------------------------------------


class Server:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="lockmod-docs-"))
        binary, module = server_binary(), module_path()
        last = ""
        for _ in range(5):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [
                    binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                    "--daemonize", "no", "--dir", str(self.dir), "--logfile", str(self.dir / "server.log"),
                    "--loadmodule", module,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            if self._ready():
                self.client = redis.Redis(port=self.port, decode_responses=True)
                self.configs = self.client.config_get("lockmod.*")
                if not self.configs:
                    pytest.fail("the server has no lockmod.* configs: is the module loaded?")
                self.sentinel = self._start_sentinel(binary)
                return
            last = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() else ""
            self.proc.kill()
            self.proc.wait()
        pytest.fail(f"the server did not start: {last[-2000:]}")

    def _ready(self) -> bool:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if redis.Redis(port=self.port, socket_timeout=1).ping():
                    return True
            except redis.exceptions.ConnectionError:
                time.sleep(0.02)
        return False

    def _start_sentinel(self, binary: str) -> subprocess.Popen:
        """One sentinel watching the server as ``mymaster``, once it names the server."""
        self.sentinel_port = free_port()
        conf = self.dir / "sentinel.conf"
        conf.write_text(
            f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir}/sentinel.log\n"
            f"sentinel monitor mymaster 127.0.0.1 {self.port} 1\n"
        )
        proc = subprocess.Popen([binary, str(conf), "--sentinel"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                addr = redis.Redis(port=self.sentinel_port, socket_timeout=1).sentinel_get_master_addr_by_name("mymaster")
                if addr and int(addr[1]) == self.port:
                    return proc
            except redis.exceptions.ConnectionError:
                pass
            time.sleep(0.02)
        proc.kill()
        proc.wait()
        pytest.fail(f"the sentinel did not start: {(self.dir / 'sentinel.log').read_text() if (self.dir / 'sentinel.log').exists() else ''}")

    def reset(self) -> None:
        """A fresh state for an example: no keys, scripts or ACL users, the configs of start."""
        c = self.client
        c.flushall()
        c.script_flush()
        for user in c.acl_users():
            if user != "default":
                c.acl_deluser(user)
        # Only what an example changed: `lockmod.fencing-era-file` is protected (as `dir` is), and
        # no example changes it.
        now = c.config_get("lockmod.*")
        for name, value in self.configs.items():
            if now.get(name) != value:
                c.config_set(name, value)

    def connections(self) -> int:
        return int(self.client.info("stats")["total_connections_received"])

    def stop(self) -> None:
        self.client.close()
        for proc in (getattr(self, "sentinel", None), self.proc):
            if proc is not None:
                proc.kill()
                proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def node_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory whose node_modules has redis-lockmod (clients/node) and ioredis."""
    if shutil.which("node") is None:
        pytest.fail("node is not installed (scripts/install-deps.sh): the JavaScript examples cannot run")
    ioredis = ROOT / "clients" / "node" / "node_modules" / "ioredis"
    if not (ioredis / "package.json").is_file():
        pytest.fail(f"no {ioredis}: run `npm ci` in clients/node (make test-docs does)")
    d = tmp_path_factory.mktemp("node-examples")
    (d / "node_modules").mkdir()
    (d / "node_modules" / "redis-lockmod").symlink_to(ROOT / "clients" / "node")
    (d / "node_modules" / "ioredis").symlink_to(ioredis)
    return d


@pytest.fixture(scope="session")
def redis_cli() -> str:
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.fail("redis-cli is not installed (scripts/install-deps.sh: redis-tools)")
    return cli


# -- running one block ----------------------------------------------------------------------------


def fail(message: str) -> None:
    """Fails the example with `message` alone (the harness's traceback says nothing more)."""
    pytest.fail(message, pytrace=False)


def substituted(block: Block) -> str:
    """The block's code with its `docs-test:` line, if any, replaced by the code it names."""
    pattern = REPLACE[block.kind]  # type: ignore[index]
    lines = []
    for line in block.code.split("\n"):
        m = pattern.match(line)
        lines.append(m.group(1) + m.group(2) if m else line)
    return "\n".join(lines)


def run_python(block: Block, server: Server, tmp: Path) -> None:
    script = tmp / "example.py"
    script.write_text(substituted(block))
    env = dict(
        os.environ,
        DOCS_TEST_PORT=str(server.port),
        DOCS_TEST_SENTINEL_PORT=str(server.sentinel_port),
        PYTHONDONTWRITEBYTECODE="1",
    )
    try:
        out = subprocess.run(
            [sys.executable, str(HERE / "prelude.py"), str(script)],
            cwd=tmp, env=env, capture_output=True, text=True, timeout=PY_TIMEOUT,
        )
    except subprocess.TimeoutExpired as e:
        out = None
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    if out is None:
        fail(f"{block.where}: the Python example did not finish within {PY_TIMEOUT} s\n{err}")
    if out.returncode != 0 or out.stderr:
        fail(f"{block.where}: the Python example failed (exit {out.returncode}):\n{out.stderr}{out.stdout}")


def run_js(block: Block, server: Server, node_dir: Path) -> None:
    code = substituted(block)
    esm = re.search(r"^\s*(import|export)\b", code, re.M) or "await " in code or "require(" not in code
    script = node_dir / ("example.mjs" if block.lang == "mjs" or esm else "example.cjs")
    script.write_text(code)
    env = dict(os.environ, DOCS_TEST_PORT=str(server.port), DOCS_TEST_SENTINEL_PORT=str(server.sentinel_port))
    env.pop("NODE_OPTIONS", None)
    proc = subprocess.Popen(
        ["node", "--require", str(HERE / "preload.cjs"), script.name],
        cwd=node_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=NODE_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        hung = True
    else:
        hung = False
    finally:
        script.unlink(missing_ok=True)
    if hung:
        fail(
            f"{block.where}: the Node example did not exit by itself within {NODE_TIMEOUT} s: it leaves "
            f"something open (a connection, a timer)\n{stderr}{stdout}"
        )
    if proc.returncode != 0 or stderr:
        fail(f"{block.where}: the Node example failed (exit {proc.returncode}):\n{stderr}{stdout}")


@dataclass
class Step:
    line: int
    text: str  # the command line as printed
    shell: bool  # `$ redis-cli ...` (bash) or `redis> ...` (redis-cli's prompt)
    reply: List[str]


def transcript(block: Block) -> List[Step]:
    steps: List[Step] = []
    for n, line in enumerate(block.code.rstrip("\n").split("\n")):
        at = block.line + 1 + n
        if line.startswith("$ "):
            steps.append(Step(at, line[2:], True, []))
        elif PROMPT.match(line):
            steps.append(Step(at, PROMPT.match(line).group(1), False, []))  # type: ignore[union-attr]
        elif not steps:
            fail(f"{block.where}: a redis-cli transcript starts with a command (`$ redis-cli ...` or `redis> ...`)")
        elif line.strip():
            steps[-1].reply.append(line.rstrip())
    if not steps:
        fail(f"{block.where}: an empty redis-cli transcript")
    return steps


CLI_OPTIONS_WITH_VALUE = {"-h", "-p", "-n", "-a", "-u", "--user", "--pass", "-s", "-r", "-i"}


def command_name(step: Step) -> str:
    """The Redis command of a step (the first argument after redis-cli's own options)."""
    if not step.shell:
        words = shlex.split(step.text)
        return words[0].upper() if words else ""
    words = shlex.split(step.text, comments=True)
    if not words or words[0] != "redis-cli":
        fail(f"line {step.line}: a `$ ` line of a redis-cli transcript runs redis-cli: {step.text}")
    i = 1
    while i < len(words) and words[i].startswith("-"):
        i += 2 if words[i] in CLI_OPTIONS_WITH_VALUE else 1
    return words[i].upper() if i < len(words) else ""


def run_step(step: Step, server: Server, cli: str) -> str:
    if step.shell:
        # As typed in a shell, redis-cli being the one on the PATH with the test server's port
        # and a terminal's output (--no-raw).
        script = f'redis-cli() {{ "{cli}" -p {server.port} --no-raw "$@"; }}\n{step.text}\n'
        argv, stdin = ["bash", "-c", script], None
    else:
        argv, stdin = [cli, "-p", str(server.port), "--no-raw"], step.text + "\n"
    try:
        out = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=CLI_TIMEOUT)
    except subprocess.TimeoutExpired:
        out = None
    if out is None:
        fail(f"line {step.line}: `{step.text}` did not answer within {CLI_TIMEOUT} s")
    if out.returncode != 0 or out.stderr.strip():
        fail(f"line {step.line}: `{step.text}` failed (exit {out.returncode}): {out.stderr}{out.stdout}")
    return out.stdout


INDEX = re.compile(r"^(\d+)\)\s+")


def tokens(lines: List[str]) -> List[Tuple[str, str]]:
    """A printed reply as its tokens: ("i", n) for each `n)` array index, ("v", text) for each
    scalar (`(integer) 1`, `"str"`, `(nil)`, `OK`, `(empty array)`, `(error) ...`)."""
    out: List[Tuple[str, str]] = []
    for line in lines:
        s = line.strip()
        if not s:
            continue
        while True:
            m = INDEX.match(s)
            if not m:
                break
            out.append(("i", m.group(1)))
            s = s[m.end():]
        out.append(("v", s))
    return out


def number(scalar: str) -> Optional[Tuple[str, int]]:
    m = re.fullmatch(r"\(integer\) (-?\d+)", scalar) or re.fullmatch(r'"(-?\d+)"', scalar)
    if not m:
        return None
    return ("int" if scalar.startswith("(") else "str", int(m.group(1)))


def leading_digit_ceiling(n: int) -> int:
    p = 10 ** (len(str(n)) - 1)
    return -(-n // p) * p


def is_duration(command: str, position: int, previous: Optional[str], printed: int) -> bool:
    if printed <= 0:
        return False
    if position == 0 and (command in TTL_COMMANDS or command in ACQUIRE_COMMANDS):
        return True
    if previous is None:
        return False
    key = previous.strip('"').lower()
    return key in ("pttl", "ttl") or key.endswith("_ms")


def scalar_matches(command: str, position: int, previous: Optional[str], printed: str, real: str) -> bool:
    if printed == real:
        return True
    p, r = number(printed), number(real)
    if p is None or r is None or p[0] != r[0]:
        return False
    if len(str(abs(p[1]))) == 13:  # an absolute time in ms
        return abs(r[1] - time.time() * 1000) <= 3600_000
    if is_duration(command, position, previous, p[1]):
        return 0 < r[1] <= leading_digit_ceiling(p[1])
    return False


def reply_mismatch(command: str, printed: List[str], real: str) -> Optional[str]:
    """None when the real reply matches the printed one, else why not."""
    want, got = tokens(printed), tokens(real.split("\n"))
    if command in UNORDERED:
        # Replies in no particular order: the same elements, in any order.
        same = sorted(v for k, v in want if k == "v") == sorted(v for k, v in got if k == "v")
        return None if same and len(want) == len(got) else "other elements"
    if len(want) != len(got):
        return "a reply of another shape"
    position, previous = 0, None
    for (wk, wv), (gk, gv) in zip(want, got):
        if wk != gk or (wk == "i" and wv != gv):
            return "a reply of another shape"
        if wk == "v":
            if not scalar_matches(command, position, previous, wv, gv):
                return f"{gv} where the example prints {wv}"
            previous, position = wv, position + 1
    return None


def run_transcript(block: Block, server: Server, cli: str) -> None:
    for step in transcript(block):
        real = run_step(step, server, cli)
        command = command_name(step)
        if not step.reply:
            if real.lstrip().startswith("(error)"):
                fail(f"{block.path.name}:{step.line}: `{step.text}` replied an error: {real}")
            continue
        why = reply_mismatch(command, step.reply, real)
        if why:
            printed = "\n".join(step.reply)
            fail(
                f"{block.path.name}:{step.line}: `{step.text}`: {why}\n--- printed:\n{printed}\n--- real:\n{real.rstrip()}"
            )


# -- the tests ------------------------------------------------------------------------------------


def test_every_block_is_run_or_says_why_not() -> None:
    """The conventions of the module docstring: every block has a language that is run or known
    not to run, markers are well-formed, transcripts are in ```redis-cli blocks."""
    assert PARSED, "no documentation found"
    problems = [p for parsed in PARSED.values() for p in parsed.problems]
    assert not problems, "\n".join(problems)


def test_the_examples_of_each_language_are_found() -> None:
    kinds = Counter(b.kind for chain in CHAINS for b in chain)
    for kind in ("python", "js", "redis-cli"):
        assert kinds[kind] > 0, f"no {kind} example found: the parser is broken"


@pytest.mark.parametrize("chain", CHAINS, ids=[f"{c[0].where}-{c[0].kind}" for c in CHAINS])
def test_example(chain: List[Block], server: Server, node_dir: Path, redis_cli: str, tmp_path: Path) -> None:
    server.reset()
    for block in chain:
        before = server.connections()
        if block.kind == "python":
            run_python(block, server, tmp_path)
        elif block.kind == "js":
            run_js(block, server, node_dir)
        else:
            run_transcript(block, server, redis_cli)
        assert server.connections() > before, f"{block.where}: the example never connected to the test server"
        RAN[block.kind] += 1


def test_the_reply_comparison_itself() -> None:
    """The rules of the module docstring, on printed and real replies."""
    ok = lambda cmd, printed, real: reply_mismatch(cmd, printed.split("\n"), real) is None  # noqa: E731
    assert ok("GET", '"x"', '"x"\n') and not ok("GET", '"x"', '"y"\n')
    assert ok("LOCK.ACQUIRE", "(integer) 28113", "(integer) 29999\n")  # (0, 30000]
    assert not ok("LOCK.ACQUIRE", "(integer) 28113", "(integer) 30001\n")
    assert not ok("LOCK.ACQUIRE", "(integer) 28113", "(nil)\n")
    assert not ok("LOCK.HOLDS", "(integer) 2", "(integer) 1\n"), "a count is exact"
    assert ok("PTTL", "(integer) 4890", "(integer) 4999\n") and not ok("PTTL", "(integer) 4890", "(integer) 5001\n")
    assert not ok("PTTL", "(integer) 4890", "(integer) -1\n")
    assert ok("RWLOCK.WLOCK", "1) (integer) 29950\n2) (integer) -1", "1) (integer) 30000\n2) (integer) -1\n")
    assert not ok("RWLOCK.WLOCK", "1) (integer) -1\n2) (integer) 7", "1) (integer) -1\n2) (integer) 1\n"), "a token is exact"
    info = ' 5) "pttl"\n 6) (integer) 28730'
    assert ok("LOCK.INFO", info, ' 5) "pttl"\n 6) (integer) 29990\n')
    assert not ok("LOCK.INFO", info, ' 5) "count"\n 6) (integer) 29990\n')
    now = int(time.time() * 1000)
    assert ok("ZRANGE", '1) "t2"\n2) "1795421732874"', f'1) "t2"\n2) "{now + 35000}"\n')
    assert not ok("ZRANGE", '1) "t2"\n2) "1795421732874"', f'1) "t2"\n2) "{now + 7200_000}"\n')
    assert ok("KEYS", '1) "a"\n2) "b"', '1) "b"\n2) "a"\n') and not ok("KEYS", '1) "a"\n2) "b"', '1) "b"\n')
    assert not ok("HGETALL", '1) "a"\n2) "b"', '1) "b"\n2) "a"\n'), "order matters elsewhere"
    assert not ok("X", "1) 1) (integer) 1", "1) (integer) 1\n"), "a nested array is another shape"
