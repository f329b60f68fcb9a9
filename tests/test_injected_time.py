"""Tests take their time from an injected clock, and the clock shift proves it.

A test that stamps data at a fixed date and then reads it through a service on the wall clock
passes until the date is a day old and fails ever after (the tamper suite did exactly that).
Three guards keep that class of defect out:

* every clocked service that tests, conformance suites and stress scripts build gets its clock
  passed explicitly, and every read of the wall clock there sits in a place that says why;
* Oh never takes a time from the database (``now()``, ``CURRENT_TIMESTAMP``, SQLite's
  ``'now'``), which no clock injection or clock shift reaches;
* ``OH_CLOCK_SHIFT_DAYS`` (tests/conftest.py) really moves the session and its children
  ahead, so the second, shifted run of ``scripts/test`` fails on a date bomb the day it is
  written.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "tests", ROOT / "stress", ROOT / "src" / "oh" / "testing"]
MECHANISM = {"tests/conftest.py", "tests/clock_shift/sitecustomize.py"}

# What reads a clock it is not given: each takes ``clock=`` (open_host passes it to Host).
CLOCKED = {"Tools", "Host", "Notebooks", "Knowledge", "Profiles", "Recall", "open_host"}
CLOCKED |= {"open_recall"}

# Calls that read the wall clock, as ``module.function`` or ``Class.method``.
WALL_CLOCK = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
}

# Where tests and scripts read the wall clock on purpose: (file, function) and why. Each is
# end to end on one real clock, or schedules processes without stamping data.
WALL_CLOCK_ALLOWED = {
    ("tests/test_mcp.py", "_prepared"): "the `oh mcp` child reads the real clock",
    ("tests/test_mcp.py", "test_oh_mcp_serves_one_notebook_over_stdio"): "reads what it wrote",
    ("tests/test_panel.py", "__init__"): "the browser's countdown reads Chromium's clock",
    ("tests/test_recall.py", "test_a_purged_notebook_leaves_no_vector"): "`oh purge` child",
    ("tests/test_recall.py", "test_the_rebuild_command_rebuilds_the_data_directory"): (
        "rebuild_command's recall reads the real clock"
    ),
    ("tests/test_cli_purge.py", "_expired_notebook"): "the `oh purge` child's clock",
    (
        "tests/test_write_batches.py",
        "test_concurrent_clients_of_oh_serve_are_answered_as_one_at_a_time",
    ): "opens notebooks for the `oh serve` child, which reads the real clock",
    ("tests/test_boundary.py", "test_oh_mcp_over_stdio_reads_each_line_as_http_reads_a_body"): (
        "the `oh mcp` child reads the real clock"
    ),
    (
        "tests/test_recall.py",
        "test_the_rebuild_command_fails_clearly_and_keeps_the_index_when_the_endpoint_is_down",
    ): "rebuild_command's recall reads the real clock",
    ("tests/test_recall.py", "test_a_rebuilt_index_on_the_sealed_default_verifies_and_recalls"): (
        "the `oh index rebuild` child reads the real clock"
    ),
    ("tests/test_postgres_recall.py", "test_index_rebuild_rebuilds_the_vectors_on_postgres"): (
        "the `oh index rebuild` child reads the real clock"
    ),
}


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@functools.cache
def _sources() -> list[tuple[str, ast.Module]]:
    found = []
    for directory in SCANNED:
        for path in sorted(directory.rglob("*.py")):
            if _relative(path) not in MECHANISM:
                found.append((_relative(path), ast.parse(path.read_text(), str(path))))
    return found


def _called_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _wall_clock_reads(tree: ast.Module) -> list[tuple[str, int, str]]:
    """``(enclosing function, line, what)`` of every wall-clock read in a module."""
    reads = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value  # datetime.now, or dt.datetime.now
            base = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
            if (base, node.func.attr) in WALL_CLOCK:
                reads.append((function, node.lineno, f"{base}.{node.func.attr}()"))
        if isinstance(node, ast.Name) and node.id == "system_clock":
            reads.append((function, node.lineno, "system_clock"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, "<module>")
    return reads


def test_every_clocked_service_a_test_builds_is_given_its_clock() -> None:
    missing = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and _called_name(node) in CLOCKED
                and not any(keyword.arg == "clock" for keyword in node.keywords)
            ):
                missing.append(f"{path}:{node.lineno}: {ast.unparse(node)[:80]}")
    assert missing == [], "pass clock= (a FakeClock on the data's timeline):\n" + "\n".join(missing)


def test_a_test_reads_the_wall_clock_only_where_it_says_why() -> None:
    unexplained, seen = [], set()
    for path, tree in _sources():
        for function, line, what in _wall_clock_reads(tree):
            if (path, function) in WALL_CLOCK_ALLOWED:
                seen.add((path, function))
            else:
                unexplained.append(f"{path}:{line}: {what} in {function}")
    assert unexplained == [], (
        "take the time from an injected clock, or (end to end on one real clock) add the place"
        " to WALL_CLOCK_ALLOWED with the reason:\n" + "\n".join(unexplained)
    )
    assert set(WALL_CLOCK_ALLOWED) - seen == set(), "allowed places that no longer read it"


# SQL that reads the database server's clock (PostgreSQL) or the process's (SQLite), in the
# migrations and in every string of the package that looks like SQL.
DATABASE_CLOCK = re.compile(
    r"\b(now|clock_timestamp|statement_timestamp|transaction_timestamp|timeofday|julianday"
    r"|unixepoch)\(|\bCURRENT_(TIMESTAMP|DATE|TIME)\b|\bLOCALTIMESTAMP\b|'now'",
    re.IGNORECASE,
)
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DEFAULT|VALUES)\b")
# The uses there are, and why each is no time a test compares.
DATABASE_CLOCK_ALLOWED = {
    # When a migration was applied: bookkeeping that nothing reads back or compares.
    "applied_at TIMESTAMPTZ NOT NULL DEFAULT now()": "bookkeeping",
    # The purge role's bound (PostgreSQL 0005; the embedded TEMP trigger's twin): the stamp a
    # purge may record is at most the database's clock plus a minute, so a forged "now" cannot
    # purge early. An upper bound, not a stamp: tests purge at times past by any real clock.
    "SELECT to_char(now() AT TIME ZONE 'UTC' + interval '1 minute'": "the purge bound",
}


def _sql_texts() -> list[tuple[str, str]]:
    texts = []
    source = ROOT / "src" / "oh"
    for path in sorted(source.rglob("*.sql")):
        texts.append((_relative(path), path.read_text()))
    for path in sorted(source.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and SQL.search(node.value)
            ):
                texts.append((f"{_relative(path)}:{node.lineno}", node.value))
    return texts


def test_oh_never_takes_a_time_from_the_database() -> None:
    found = []
    for where, text in _sql_texts():
        for line in text.splitlines():
            if DATABASE_CLOCK.search(line) and line.strip().rstrip(",") not in (
                DATABASE_CLOCK_ALLOWED
            ):
                found.append(f"{where}: {line.strip()}")
    assert found == [], "stamp times from the injected clock, not the database's:\n" + "\n".join(
        found
    )


# -- the clock shift --------------------------------------------------------------------------

PROBE = """
import subprocess
import sys
from datetime import UTC, datetime, timedelta

WRITTEN = datetime.fromisoformat("{written}")  # "today", fixed in the test: a date bomb


def test_a_note_written_today_is_younger_than_a_month_by_the_wall_clock():
    assert datetime.now(UTC) - WRITTEN < timedelta(days=30)


def test_a_child_process_reads_the_same_clock():
    code = "import datetime; print(datetime.datetime.now(datetime.UTC).isoformat())"
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    moment = datetime.fromisoformat(child.stdout.strip())
    assert abs(moment - datetime.now(UTC)) < timedelta(minutes=10)
"""


def _probe(tmp_path: Path, shift: str | None) -> subprocess.CompletedProcess[str]:
    """The probe run by pytest with this suite's conftest, shifted or not."""
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    shutil.copytree(ROOT / "tests" / "clock_shift", tmp_path / "clock_shift", dirs_exist_ok=True)
    # The moment of writing is the real one even if this session runs shifted.
    written = datetime.fromtimestamp(_real_time(), UTC).isoformat()
    (tmp_path / "test_probe.py").write_text(PROBE.format(written=written))
    environment = _unshifted(dict(os.environ))
    environment["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the probe needs no plugin
    if shift is not None:
        environment["OH_CLOCK_SHIFT_DAYS"] = shift
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _unshifted(environment: dict[str, str]) -> dict[str, str]:
    """The environment without this session's clock shift (if it runs shifted)."""
    environment = {k: v for k, v in environment.items() if k != "OH_CLOCK_SHIFT_DAYS"}
    environment["PYTHONPATH"] = ""
    return environment


def _real_time() -> float:
    """The real time, also when this session runs shifted: a child without the shift's."""
    done = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env=_unshifted(dict(os.environ)),
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout)


def test_a_date_bomb_passes_on_todays_clock_and_fails_under_the_clock_shift(
    tmp_path: Path,
) -> None:
    today = _probe(tmp_path, None)
    assert today.returncode == 0, today.stdout
    assert "clock: real" in today.stdout
    shifted = _probe(tmp_path, "400")
    assert shifted.returncode == 1, shifted.stdout
    assert "clock: shifted 400 days ahead" in shifted.stdout
    assert "FAILED test_probe.py::test_a_note_written_today_is_younger_than_a_month" in (
        shifted.stdout
    )
    # The shift reaches Python children: they agree with the session's shifted clock.
    assert "PASSED test_probe.py::test_a_child_process_reads_the_same_clock" in shifted.stdout


def test_a_clock_shift_that_is_not_a_number_of_days_stops_the_run(tmp_path: Path) -> None:
    done = _probe(tmp_path, "a year")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    assert "OH_CLOCK_SHIFT_DAYS must be a whole number of days" in done.stdout + done.stderr


def test_every_test_the_shifted_run_leaves_out_exists() -> None:
    """A renamed test would silently drop out of the list and back into the shifted run (or a
    typo would leave a slow test in): each left-out id names a test function that exists."""
    script = (ROOT / "scripts" / "test").read_text()
    left_out = re.findall(r"^\s+(tests/[\w/]+\.py)::(\w+)$", script, re.MULTILINE)
    assert left_out
    for path, name in left_out:
        tree = ast.parse((ROOT / path).read_text())
        functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in functions, f"{path}::{name} is not a test"
