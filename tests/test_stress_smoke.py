"""Small, fast versions of the stress scripts under stress/ (the full runs are on demand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_late_writers_racing_the_purge_never_resurrect_a_notebook() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "stress" / "purge_race.py"), "--races", "200", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["purged"] == 200
    assert summary["refused_purged"] == 200 * summary["writers"]
    assert summary["applied"] > 0
    assert summary["resurrections"] == 0
