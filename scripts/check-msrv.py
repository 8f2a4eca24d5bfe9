#!/usr/bin/env python3
"""Checks that a crate's declared `rust-version` builds with the committed Cargo.lock.

`make lint` runs it for the Rust client (clients/rust). Building with that old a toolchain
(`cargo +1.88 build`) needs the toolchain, which CI and the shared machine do not have, so this
reads what cargo itself would check: `cargo metadata --locked` lists every package of the
lockfile's resolve with its manifest's `rust-version`, and cargo refuses to build a package
whose `rust-version` is above the compiler's ("package X cannot be built because it requires
rustc 1.89 or newer"). So every package the crate builds (its normal and build dependencies,
transitively; the resolve unifies the workspace's features, so this may check a little more
than one build needs, never less) must declare a `rust-version` at most the crate's own.

What it cannot see: a package that declares no `rust-version` (old crates that predate the
field) is listed but not failed; and the crate's own code, which clippy's `incompatible_msrv`
lint (on by default, run by `make lint`) checks against the same field for the standard
library's APIs.

    python3 scripts/check-msrv.py [crate]       (default: redis-lockmod-client)
    python3 scripts/check-msrv.py --self-test
"""

import json
import subprocess
import sys


def version(text):
    """'1.88' or '1.88.0' as a comparable tuple (1, 88, 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def built_by(metadata, crate):
    """The packages `crate` builds: itself and its normal and build dependencies, transitively."""
    packages = {p["id"]: p for p in metadata["packages"]}
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    roots = [p["id"] for p in metadata["packages"] if p["name"] == crate and p["source"] is None]
    if not roots:
        raise SystemExit(f"check-msrv: no workspace crate named {crate}")
    seen, stack = set(), roots[:]
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                stack.append(dep["pkg"])
    return packages[roots[0]], [packages[p] for p in sorted(seen) if p != roots[0]]


def check(crate_pkg, deps):
    """(errors, undeclared): packages above the crate's rust-version, and those declaring none."""
    declared = crate_pkg.get("rust_version")
    if not declared:
        return [f"{crate_pkg['name']} declares no rust-version"], []
    ours = version(declared)
    errors, undeclared = [], []
    for p in deps:
        rv = p.get("rust_version")
        if rv is None:
            undeclared.append(f"{p['name']} {p['version']}")
        elif version(rv) > ours:
            errors.append(f"{p['name']} {p['version']} requires rustc {rv}, above {crate_pkg['name']}'s rust-version {declared}")
    return errors, undeclared


def self_test():
    def pkg(name, rv, source="registry"):
        return {"id": name, "name": name, "version": "1.0.0", "rust_version": rv, "source": source}

    def dep(name, kind=None):
        return {"pkg": name, "dep_kinds": [{"kind": kind}]}

    metadata = {
        "packages": [pkg("me", "1.88", None), pkg("ok", "1.85.0"), pkg("new", "1.89.0"), pkg("old", None),
                     pkg("devonly", "1.99"), pkg("deep", "1.90")],
        "resolve": {"nodes": [
            {"id": "me", "deps": [dep("ok"), dep("old", "build"), dep("devonly", "dev")]},
            {"id": "ok", "deps": [dep("deep")]},
            {"id": "new", "deps": []}, {"id": "old", "deps": []}, {"id": "devonly", "deps": []}, {"id": "deep", "deps": []},
        ]},
    }
    me, deps = built_by(metadata, "me")
    assert sorted(p["name"] for p in deps) == ["deep", "ok", "old"], deps
    errors, undeclared = check(me, deps)
    assert errors == ["deep 1.0.0 requires rustc 1.90, above me's rust-version 1.88"], errors
    assert undeclared == ["old 1.0.0"], undeclared
    assert version("1.88") == version("1.88.0") < version("1.88.1")
    print("check-msrv: self-test passed")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    crate = sys.argv[1] if len(sys.argv) > 1 else "redis-lockmod-client"
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--locked"],
                         check=True, capture_output=True, text=True).stdout
    me, deps = built_by(json.loads(out), crate)
    errors, undeclared = check(me, deps)
    for e in errors:
        print(f"check-msrv: {e}", file=sys.stderr)
    if errors:
        print(f"check-msrv: {crate}'s rust-version does not build with Cargo.lock: pin those packages lower "
              "(cargo update -p NAME --precise VERSION) or raise the rust-version", file=sys.stderr)
        sys.exit(1)
    print(f"check-msrv: {crate} (rust-version {me['rust_version']}): {len(deps)} locked dependencies, none above it"
          + (f"; {len(undeclared)} declare none ({', '.join(undeclared)})" if undeclared else ""))


if __name__ == "__main__":
    main()
