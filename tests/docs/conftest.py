"""Prints how many documented examples ran, per language (tests/docs/test_docs.py)."""

from __future__ import annotations

from collections import Counter


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # type: ignore[no-untyped-def]
    import test_docs

    ran: Counter = test_docs.RAN
    blocks = [b for parsed in test_docs.PARSED.values() for b in parsed.blocks]
    marked = [b for b in blocks if b.kind and b.skip_reason]
    not_run = Counter(b.lang or "(none)" for b in blocks if b.kind is None)
    terminalreporter.write_sep("-", "documented examples")
    terminalreporter.write_line(
        f"ran {sum(ran.values())} blocks: " + ", ".join(f"{k} {ran[k]}" for k in ("python", "js", "redis-cli"))
        + f"; skipped by marker {len(marked)}"
        + "".join(f" ({b.where}: {b.skip_reason})" for b in marked)
        + "; not run by language: " + ", ".join(f"{k} {v}" for k, v in sorted(not_run.items()))
    )
