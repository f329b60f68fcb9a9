"""`oh demo` walks through SPEC §0 and every step behaves as specified."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from oh.cli import main
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.verify import verify_store


def test_the_demo_walks_through_the_reef_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--data", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert '"status": "refused", "reason": "stale", "current_version": 3' in out
    assert "same result as before: True; log entries: 3" in out
    assert "verify: replayed 4 log entries" in out and out.rstrip().endswith("OK")
    store = SqliteMemoryStore(tmp_path / "memory.db")
    assert verify_store(store).ok
    assert len(store.records(store.notebook_ids()[0])) == 3
    store.close()


def test_oh_verify_reports_ok_then_a_tampered_entry(tmp_path: Path) -> None:
    assert main(["demo", "--data", str(tmp_path)]) == 0
    command = [sys.executable, "-m", "oh.cli", "verify", "--data", str(tmp_path)]
    ok = subprocess.run(command, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "4 log entries, 3 records; 0 knowledge revisions, 0 reviewed versions: OK" in ok.stdout
    store = SqliteMemoryStore(tmp_path / "memory.db")
    store._conn.execute("UPDATE log SET content = replace(content, '2014', '2019')")
    store.close()
    bad = subprocess.run(command, capture_output=True, text=True)
    assert bad.returncode == 1
    assert "digest" in bad.stdout and "FAILED" in bad.stdout
