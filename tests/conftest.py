"""Session-wide settings of the test run: an optional shift of the process clock.

``OH_CLOCK_SHIFT_DAYS=400 pytest ...`` moves the clock that ``datetime.now``, ``time.time`` and
friends read 400 days ahead for the whole session (time-machine, still ticking), here and in
every Python child that inherits the environment (see ``clock_shift/sitecustomize.py``).
Tests take their time from an injected clock, so they pass whatever the date; a test that
mixes data stamped at a fixed date with the wall clock (a date bomb) fails under the shift
the day it is written instead of a year later. ``scripts/test`` runs the reliability and
conformance modules a second time this way.

Not shifted: ``time.monotonic``/``perf_counter`` (deadlines and timeouts stay real), the
PostgreSQL server's ``now()``, Chromium's ``Date.now()``, and children given an environment
of their own. Oh stamps every time from its injected clock, never from the database's, and
``tests/test_injected_time.py`` checks that it stays so.
"""

from __future__ import annotations

import importlib.util
import os
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SHIFT_DIRECTORY = Path(__file__).resolve().parent / "clock_shift"


def _shift_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "oh_clock_shift", SHIFT_DIRECTORY / "sitecustomize.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_shift = _shift_module()
_traveller: Any = None


def pytest_configure(config: pytest.Config) -> None:
    global _traveller
    try:
        days = _shift.shift_days()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    if days and _traveller is None:
        _traveller = _shift.start_shift(days)
        # Children inherit the shift through sitecustomize on their PYTHONPATH.
        paths = [str(SHIFT_DIRECTORY), *filter(None, [os.environ.get("PYTHONPATH")])]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def pytest_unconfigure(config: pytest.Config) -> None:
    global _traveller
    if _traveller is not None:
        _traveller.stop()
        _traveller = None


def pytest_report_header(config: pytest.Config) -> str:
    days = _shift.shift_days()
    if days:
        now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
        return f"clock: shifted {days} days ahead ({_shift.VARIABLE}), the process reads {now}"
    return f"clock: real (set {_shift.VARIABLE}=400 to run a year and more ahead)"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """What harnesses declared they cannot offer (``oh.testing.declared``): each such test is a
    skip whose reason starts ``declared:``, listed here by harness and thing, never silently."""
    from oh.testing.declared import DECLARED

    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(DECLARED):
            what = reason.removeprefix(DECLARED).split(":", 1)[0].strip()
            counts[what] = counts.get(what, 0) + 1
    if counts:
        terminalreporter.section("declared by the harnesses: not offered, not tested")
        for what, count in sorted(counts.items()):
            terminalreporter.line(f"{count:4d}  {what}")
    _conformance_table(terminalreporter)


def _conformance_table(terminalreporter: Any) -> None:
    """Which conformance suite ran on which backend, with keys or without, and how its tests
    ended: read from what each suite's harness actually opened (``oh.testing.declared.ran``)."""
    from oh.testing.declared import CONFORMANCE

    def where(nodeid: str) -> tuple[str, str]:
        owner, _, test = nodeid.rpartition("::")
        return owner, test.partition("[")[2]

    reports = [
        report
        for outcome in ("passed", "failed", "skipped", "error")
        for report in terminalreporter.stats.get(outcome, [])
        if getattr(report, "nodeid", "")
    ]
    seen: dict[tuple[str, str], str] = {}
    by_class: dict[str, set[str]] = {}
    for report in reports:
        for name, value in getattr(report, "user_properties", ()):
            if name == CONFORMANCE:
                seen[where(report.nodeid)] = value
                by_class.setdefault(where(report.nodeid)[0], set()).add(value)
    if not seen:
        return
    ended: dict[str, dict[str, int]] = {}
    for report in reports:
        if report.when != "call" and not (report.failed or report.skipped):
            continue
        owner, params = where(report.nodeid)
        combination = seen.get((owner, params))
        if combination is None:  # a test that opened no part: its class's, by its parameters
            ids = set(params.split("-"))
            found = {
                value
                for (other, given), value in seen.items()
                if other == owner and set(given.split("-")) <= ids
            } or by_class.get(owner, set())
            if len(found) != 1:
                continue  # not a conformance suite's test
            combination = next(iter(found))
        outcome = "failed" if report.failed else "skipped" if report.skipped else "passed"
        counts = ended.setdefault(combination, {"passed": 0, "skipped": 0, "failed": 0})
        counts[outcome] += 1
    terminalreporter.section("conformance suites by backend and keys (tests passed/skipped/failed)")
    terminalreporter.line(f"{'suite':<30} {'backend':<28} {'keys':<5} passed skipped failed")
    for combination, counts in sorted(ended.items()):
        suite, backend, keys = combination.split("|")
        terminalreporter.line(
            f"{suite:<30} {backend:<28} {'yes' if keys == 'True' else 'no':<5}"
            f" {counts['passed']:6d} {counts['skipped']:7d} {counts['failed']:6d}"
        )
