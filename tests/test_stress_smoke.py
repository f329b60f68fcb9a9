"""Small, fast versions of the stress scripts under stress/ (the full runs are on demand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from oh.testing.postgres_cluster import find_binaries

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


def test_a_backup_taken_while_open_cannot_be_opened_once_forgotten() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "stress" / "backups.py"), "--notebooks", "6", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["forgotten_notebooks"] == 6 and summary["tries"] > 0
    assert summary["opened"] == 0 and summary["bytes_found"] == 0
    assert summary["refused_by_the_store"] == 6 and summary["kept_still_read"] == 3
    # The other copies: recall vectors, rejected proposals, keys with a reader holding the store.
    assert summary["vector_tries"] > 0 and summary["vectors_opened"] == 0
    assert summary["plain_vectors"] == 0 and summary["words_recovered"] == 0
    assert summary["proposals_rejected"] == 6
    assert summary["forgets_with_a_reader"] == 6 and summary["keys_left_with_a_reader"] == 0
    # Names, digests and the rest as tokens: none opens, no note name, no guess confirmed.
    assert summary["token_tries"] > 0 and summary["tokens_opened"] == 0
    assert summary["guesses"] > 0 and summary["guesses_confirmed"] == 0
    assert summary["names_held"] == 0


def test_a_base_backup_and_the_wal_archive_of_postgres_cannot_be_opened_once_forgotten() -> None:
    if find_binaries() is None:
        pytest.skip("PostgreSQL server binaries not found (apt-get install postgresql-15)")
    argv = [sys.executable, str(ROOT / "stress" / "backups.py"), "--notebooks", "6", "--postgres"]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["backend"] == "postgres" and summary["tries"] > 0
    assert summary["opened"] == 0 and summary["bytes_found"] == 0
    assert summary["refused_by_the_store"] == 6 and summary["kept_still_read"] == 3
    assert summary["proposals_rejected"] == 6 and summary["keys_left_with_a_reader"] == 0
    assert summary["token_tries"] > 0 and summary["tokens_opened"] == 0
    assert summary["guesses"] > 0 and summary["guesses_confirmed"] == 0
    assert summary["names_held"] == 0


def test_forgeries_of_reviewed_knowledge_are_never_served_with_keys() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "stress" / "tamper.py"), "--keys", "--trials", "200", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["ok"] and summary["verify_missed"] == 0, summary
