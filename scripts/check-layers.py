#!/usr/bin/env python3
"""The layering rule of every Rust crate in the house, checked on its `use` lines (`make lint`).

Reads every file of a crate's module tree (from src/lib.rs, or src/main.rs for a binary,
following `mod` lines and `#[path]`), collects the crate paths each file names (`use
crate::...`, `use super::...`, and `crate::x::y` / `super::x` / `alias::x` written inline),
resolves each to the file that defines the name (through `pub use` re-exports, which import
nothing themselves), and fails on:

- a cycle among the top-level modules (`src/<module>/` or `src/<module>.rs`);
- a circle of files (a file that imports, directly or around, a file that imports it);
- `ffi` (the module's ground floor) naming any module of the crate but `core`.

Without a SRC_DIR it checks every crate of the workspace: the members of the root
Cargo.toml's `[workspace]` (the module, `bench/`), and any other crate with a Cargo.toml under
`clients/` (a Rust client library), so no crate is left out because nobody listed it.

Usage: scripts/check-layers.py [SRC_DIR]      (one crate's src/)
       scripts/check-layers.py [--root DIR]   (every crate of the workspace at DIR; default:
                                               this script's parent)
       scripts/check-layers.py --self-test    (shows it fails on a cycle, on ffi upward, and on
                                               a circle in a workspace member)
"""

import os
import re
import subprocess
import sys
import tempfile

# The ground floor and the only modules it may import.
GROUND = "ffi"
GROUND_MAY_IMPORT = {"ffi", "core"}


# -- Reading Rust ---------------------------------------------------------------------------


def strip(text):
    """The text with comments, string and char literals blanked (lines and offsets kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == "/" and nxt == "*":
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            m = re.match(r"'(\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_top(s):
    """Splits `a, b::{c, d}, e` at top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def expand_use(tree, prefix=()):
    """(segments, alias) for each leaf of a use tree; alias '*' for a glob."""
    tree = tree.strip()
    m = re.match(r"^(.*?)::\s*\{(.*)\}$", tree, re.S)
    if m:
        base = tuple(x.strip() for x in m.group(1).split("::") if x.strip())
        out = []
        for p in split_top(m.group(2)):
            out += expand_use(p, prefix + base)
        return out
    if tree.startswith("{") and tree.endswith("}"):
        out = []
        for p in split_top(tree[1:-1]):
            out += expand_use(p, prefix)
        return out
    alias = None
    m = re.match(r"^(.*)\s+as\s+(\w+)$", tree, re.S)
    if m:
        tree, alias = m.group(1).strip(), m.group(2)
    segs = prefix + tuple(x.strip() for x in tree.split("::") if x.strip())
    if segs and segs[-1] == "*":
        return [(segs[:-1], "*")]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    if not segs:
        return []
    return [(segs, alias or segs[-1])]


# -- The module tree ------------------------------------------------------------------------


class File:
    def __init__(self, path, modpath):
        self.path = path  # relative to src
        self.modpath = modpath  # tuple of module names from the crate root
        self.text = ""
        self.uses = []  # (segments relative, alias, public, inline_modpath, offset)
        self.inline_paths = []  # (segments, inline_modpath)
        self.reexports = {}  # name -> absolute segments
        self.items = set()
        self.children = {}  # child module name -> File (file modules only)


def inline_scope(stripped):
    """For each offset, the stack of inline `mod x {` blocks it lies in."""
    marks = []  # (start, end, name)
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", stripped):
        depth, j = 1, m.end()
        while j < len(stripped) and depth:
            if stripped[j] == "{":
                depth += 1
            elif stripped[j] == "}":
                depth -= 1
            j += 1
        marks.append((m.end(), j, m.group(1)))

    def at(off):
        return tuple(name for (s, e, name) in marks if s <= off < e)

    return at


def crate_root(src):
    """The file a crate's module tree starts from: lib.rs, else main.rs."""
    return "lib.rs" if os.path.exists(os.path.join(src, "lib.rs")) else "main.rs"


def load_tree(src):
    files = {}
    root_file = crate_root(src)

    def load(rel, modpath):
        f = File(rel, modpath)
        files[rel] = f
        with open(os.path.join(src, rel), encoding="utf-8") as fh:
            f.text = fh.read()
        s = strip(f.text)
        f.stripped = s
        at = inline_scope(s)
        f.scope = at
        is_dir_owner = rel == root_file or os.path.basename(rel) == "mod.rs"
        here = os.path.dirname(rel)
        own_dir = here if is_dir_owner else os.path.join(here, os.path.splitext(os.path.basename(rel))[0])
        for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", s):
            if at(m.start()):
                continue
            attrs, name = f.text[m.start(1) : m.end(1)], m.group(2)
            pm = re.search(r'#\[path\s*=\s*"([^"]+)"\]', attrs)
            if pm:
                cand = [os.path.normpath(os.path.join(here, pm.group(1)))]
            else:
                cand = [os.path.join(own_dir, name + ".rs"), os.path.join(own_dir, name, "mod.rs")]
            for c in cand:
                if os.path.exists(os.path.join(src, c)):
                    f.children[name] = load(c, modpath + (name,))
                    break
        for m in re.finditer(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+(\w+)", s):
            f.items.add(m.group(1))
        for m in re.finditer(r"\bmacro_rules!\s*(\w+)", s):
            f.items.add(m.group(1))
        for m in re.finditer(r"(?<![\w:$])(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", s):
            public = bool(m.group(1)) and "(super)" not in (m.group(1) or "") or (
                bool(m.group(1)) and "(super)" in m.group(1)
            )
            for segs, alias in expand_use(m.group(2)):
                f.uses.append((segs, alias, public, at(m.start()), m.start(), m.end()))
        return f

    root = load(root_file, ())
    return root, files


def module_index(files):
    return {f.modpath: f for f in files.values() if not f.path.endswith("_tests.rs") or True}


def absolute(f, segs, inline):
    """Absolute segments (starting after `crate`) of a path written in file f, or None."""
    base = list(f.modpath) + list(inline)
    segs = list(segs)
    if not segs:
        return None
    if segs[0] == "crate":
        return tuple(segs[1:])
    if segs[0] in ("super", "self"):
        cur = base
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                cur = cur[:-1]
            segs = segs[1:]
        return tuple(cur + segs)
    return None


def resolve(mods, macros, segs, seen=None):
    """The file defining what absolute `segs` names (following re-exports), or None."""
    if seen is None:
        seen = set()
    if segs in seen:
        return None
    seen.add(segs)
    if len(segs) == 1 and segs[0] in macros and () in mods and segs[0] not in mods[()].children:
        return macros[segs[0]]
    # Longest module prefix.
    k = len(segs)
    while k > 0 and tuple(segs[:k]) not in mods:
        k -= 1
    mod = mods.get(tuple(segs[:k]))
    if mod is None:
        return None
    rest = segs[k:]
    if not rest:
        return mod
    name = rest[0]
    if name in mod.reexports:
        target = mod.reexports[name]
        r = resolve(mods, macros, tuple(target) + tuple(rest[1:]), seen)
        if r is not None:
            return r
    return mod


def build_graph(src):
    root, files = load_tree(src)
    mods = {f.modpath: f for f in files.values()}
    macros = {}
    for f in files.values():
        for m in re.finditer(r"#\[macro_export\]\s*macro_rules!\s*(\w+)", f.stripped):
            macros[m.group(1)] = f
    # Re-exports first (they are transparent), then every name each file uses.
    for f in files.values():
        for segs, alias, public, inline, _, _ in f.uses:
            if not public or inline or alias == "*":
                continue
            a = absolute(f, segs, inline)
            if a is None and segs[0] in f.children:
                a = tuple(f.modpath) + tuple(segs)
            if a is not None:
                f.reexports[alias] = a
    edges = {}  # file path -> {target path: set(names)}

    def add(f, target, name):
        if target is None or target is f:
            return
        edges.setdefault(f.path, {}).setdefault(target.path, set()).add(name)

    for f in files.values():
        aliases = {}  # alias -> absolute segments (module imports and items)
        for segs, alias, public, inline, start, end in f.uses:
            a = absolute(f, segs, inline)
            if a is None and segs[0] in f.children:
                a = tuple(f.modpath) + tuple(segs)
            if a is None:
                continue
            if alias != "*":
                aliases[alias] = a
            if alias == "*":
                add(f, resolve(mods, macros, a), "*")
                continue
            target = resolve(mods, macros, a)
            if target is not None and target.modpath == a:
                continue  # a module imported by name: its uses count below
            if public and not inline:
                # A re-export imports nothing unless the file uses the name itself.
                body = f.stripped[:start] + f.stripped[end:]
                if not re.search(r"(?<![\w:])" + re.escape(alias) + r"\b", body):
                    continue
            add(f, target, a[-1])
        s = f.stripped
        use_spans = [(st, en) for (_, _, _, _, st, en) in f.uses]

        def in_use(off):
            return any(st <= off < en for st, en in use_spans)

        for m in re.finditer(r"(?<![\w:$])((?:crate|super|self)(?:::\w+)+)", s):
            if in_use(m.start()):
                continue
            segs = tuple(m.group(1).split("::"))
            a = absolute(f, segs, f.scope(m.start()))
            if a is not None:
                add(f, resolve(mods, macros, a), a[-1])
        # `alias::x` where alias is a module imported by `use`, or a child module.
        heads = {al: a for al, a in aliases.items()}
        for c in f.children:
            heads.setdefault(c, tuple(f.modpath) + (c,))
        if heads:
            pat = r"(?<![\w:$])(" + "|".join(re.escape(h) for h in heads) + r")((?:::\w+)+)"
            for m in re.finditer(pat, s):
                if in_use(m.start()):
                    continue
                a = heads[m.group(1)] + tuple(m.group(2).split("::")[1:])
                add(f, resolve(mods, macros, a), a[-1])
        # Macros exported at the crate root, called as `crate::name!`: handled above.
    return files, edges


# -- Cycles ---------------------------------------------------------------------------------


def sccs(nodes, succ):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def top(f):
    return f.modpath[0] if f.modpath else None


def check(src, quiet=False, label="src"):
    files, edges = build_graph(src)
    problems = []
    by_path = {f.path: f for f in files.values()}
    # Top-level modules.
    tedges = {}
    for a, targets in edges.items():
        ta = top(by_path[a])
        for b, names in targets.items():
            tb = top(by_path[b])
            if ta is None or tb is None or ta == tb:
                continue
            tedges.setdefault(ta, {}).setdefault(tb, set()).update(names)
    tops = sorted({top(f) for f in files.values() if top(f)})
    for comp in sccs(tops, {k: set(v) for k, v in tedges.items()}):
        detail = "; ".join(f"{a} -> {b}" for a in comp for b in sorted(tedges.get(a, {})) if b in comp)
        problems.append(f"module cycle: {' '.join(comp)} ({detail})")
    # Files.
    fsucc = {a: set(t) for a, t in edges.items()}
    for comp in sccs(sorted(by_path), fsucc):
        detail = "; ".join(
            f"{a} -> {b} ({', '.join(sorted(edges[a][b]))})" for a in comp for b in sorted(edges.get(a, {})) if b in comp
        )
        problems.append(f"file circle: {' '.join(label + '/' + c for c in comp)}: {detail}")
    # The ground floor.
    for a, targets in sorted(edges.items()):
        if top(by_path[a]) != GROUND:
            continue
        for b, names in sorted(targets.items()):
            tb = top(by_path[b])
            if tb is not None and tb not in GROUND_MAY_IMPORT:
                problems.append(f"{GROUND} imports upward: {label}/{a} -> {label}/{b} ({', '.join(sorted(names))})")
    if not quiet:
        print(f"layers: {label}: {len(tops)} top-level modules, {len(files)} files")
        for t in tops:
            print(f"  {t:<9} imports {', '.join(sorted(tedges.get(t, {}))) or '-'}")
        if not problems:
            ground = ", ffi imports only core" if GROUND in tops else ""
            print(f"layers: {label}: no module cycle, no file circle{ground}")
    for p in problems:
        print(f"layers: {label}: " + p, file=sys.stderr)
    return not problems


def workspace_crates(root):
    """The crate directories of the workspace at `root`: its `[workspace]` members, and every
    directory under clients/ with a Cargo.toml."""
    crates = []
    manifest = os.path.join(root, "Cargo.toml")
    with open(manifest, encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^\[workspace\][^\[]*?members\s*=\s*\[([^\]]*)\]", text, re.M | re.S)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else ["."]
    for member in members:
        crates.append(os.path.normpath(os.path.join(root, member)))
    clients = os.path.join(root, "clients")
    if os.path.isdir(clients):
        for dirpath, dirnames, filenames in os.walk(clients):
            dirnames[:] = [d for d in dirnames if d not in ("node_modules", "target", ".venv")]
            if "Cargo.toml" in filenames:
                crates.append(os.path.normpath(dirpath))
    seen, out = set(), []
    for c in crates:
        if c not in seen and os.path.isdir(os.path.join(c, "src")):
            seen.add(c)
            out.append(c)
    return out


def check_workspace(root):
    ok = True
    for crate in workspace_crates(root):
        label = os.path.relpath(os.path.join(crate, "src"), root)
        ok = check(os.path.join(crate, "src"), label=label) and ok
    return ok


# -- Self-test ------------------------------------------------------------------------------


def write_tree(root, files):
    for rel, text in files.items():
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(text)


def self_test():
    clean = {
        "lib.rs": "pub mod core;\npub mod ffi;\npub mod up;\n",
        "core/mod.rs": "//! c\npub mod a;\npub mod b;\npub use a::A;\n",
        "core/a.rs": "pub struct A;\n",
        "core/b.rs": "use super::A;\npub fn b(_: A) {}\n",
        "ffi.rs": "use crate::core::A;\npub fn f(_: A) {}\n",
        "up.rs": "use crate::{core, ffi};\npub fn u() { ffi::f(core::A); crate::core::b::b(core::A) }\n",
    }
    cases = [
        ("a clean tree passes", {}, True, ""),
        ("a cycle of top-level modules fails", {"core/b.rs": "use super::A;\npub fn b(_: A) { crate::up::u() }\n"}, False, "module cycle"),
        ("a circle of files fails", {"core/a.rs": "pub struct A;\npub fn a() { super::b::b(A) }\n"}, False, "file circle"),
        ("a circle through a use of a module alias fails", {"core/a.rs": "use super::b;\npub struct A;\npub fn a() { b::b(A) }\n"}, False, "file circle"),
        ("ffi importing upward fails", {"ffi.rs": "use crate::core::A;\npub fn f(_: A) {}\npub fn g() { crate::up::u() }\n"}, False, "ffi imports upward"),
        ("a comment or a string naming a module passes", {"ffi.rs": 'use crate::core::A;\n// crate::up::u\npub fn f(_: A) { let _ = "crate::up::u"; }\n'}, True, ""),
    ]
    ok = True
    me = os.path.abspath(__file__)

    def verdict(name, args, want, needle):
        """Runs the check with `args`; true if it passed or failed as `want` says, naming `needle`."""
        r = subprocess.run([sys.executable, me, *args], capture_output=True, text=True)
        good = (r.returncode == 0) == want and needle in r.stderr
        print(f"self-test: {'ok  ' if good else 'FAIL'} {name}")
        if not good:
            print(r.stdout + r.stderr)
        return good

    for name, change, want, needle in cases:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "src")
            write_tree(src, {**clean, **change})
            ok = verdict(name, [src], want, needle) and ok
    # A workspace: the module, a binary member (bench/, main.rs) and a client crate nobody
    # listed (clients/rust/); a circle in either member fails the whole check.
    bench = {"main.rs": "mod a;\nmod b;\nfn main() { a::a() }\n", "a.rs": "pub fn a() {}\n", "b.rs": "pub fn b() {}\n"}
    client = {"lib.rs": "pub mod c;\npub mod d;\n", "c.rs": "pub fn c() {}\n", "d.rs": "pub fn d() {}\n"}
    workspace = [
        ("a clean workspace passes", {}, {}, True, ""),
        ("a circle of files in a binary member fails", {"a.rs": "pub fn a() { crate::b::b() }\n", "b.rs": "pub fn b() { super::a::a() }\n"}, {}, False, "bench/src: file circle"),
        ("a circle in a client crate nobody listed fails", {}, {"c.rs": "pub fn c() { crate::d::d() }\n", "d.rs": "pub fn d() { crate::c::c() }\n"}, False, "clients/rust/src: module cycle"),
    ]
    for name, bench_change, client_change, want, needle in workspace:
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "Cargo.toml"), "w", encoding="utf-8") as fh:
                fh.write('[package]\nname = "m"\n\n[workspace]\nmembers = [".", "bench"]\n')
            write_tree(os.path.join(d, "src"), clean)
            write_tree(os.path.join(d, "bench", "src"), {**bench, **bench_change})
            write_tree(os.path.join(d, "clients", "rust", "src"), {**client, **client_change})
            write_tree(os.path.join(d, "clients", "rust"), {"Cargo.toml": '[package]\nname = "c"\n'})
            ok = verdict(name, ["--root", d], want, needle) and ok
    return ok


def main(argv):
    if argv[1:] == ["--self-test"]:
        return 0 if self_test() else 1
    if len(argv) == 3 and argv[1] == "--root":
        return 0 if check_workspace(os.path.normpath(argv[2])) else 1
    if len(argv) > 1:
        return 0 if check(os.path.normpath(argv[1])) else 1
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    return 0 if check_workspace(os.path.normpath(root)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
