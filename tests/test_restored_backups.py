"""Restored backups are checkable: ``oh verify`` and ``oh export`` on a data directory restored
from a backup taken before a forget report each forgotten notebook (its data key is gone, so its
rows can never be read) and go on; the exit status says whether anything else failed.

The embedded backend end to end, as an operator does it: a byte copy of the data directory, a
forget, the copy restored beside the live keys, the ``oh`` commands as subprocesses. PostgreSQL
through the same store code: a notebook whose key is destroyed while its rows stay, as they do
in a restored base backup.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oh.config import Locations, close_host, open_host
from oh.keys import Keyring, MasterKey, MasterKeys
from oh.storage.postgres.notebooks import PostgresMemoryStore
from oh.storage.sqlite.keys import SqliteKeyStore
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import add, open_notebook, write
from oh.testing.postgres_cluster import Schema, find_binaries, fresh_schema, shared_cluster
from oh.testing.served import oh_command
from oh.transfer import export_notebooks
from oh.verify import verify_store


def _remember(host: Any, notebook_id: str, text: str) -> None:
    written = host.call_tool(
        host.agent_token(notebook_id),
        "remember",
        {
            "based_on": 0,
            "request_id": "r-1",
            "changes": [{"op": "add", "record": {"name": "note:x", "text": text}}],
        },
    )
    assert written["status"] == "applied", written


@pytest.fixture
def restored(tmp_path: Path) -> dict[str, Any]:
    """Three notebooks; a backup of the data directory; the first two forgotten; the backup
    restored (the live keys directory stays, as it must: it is never backed up)."""
    data = tmp_path / "data"
    clock = FakeClock()
    host = open_host(Locations(data), clock=clock)
    try:
        host.register_document("you", "doc")
        ids = []
        for run in ("a", "b", "c"):
            notebook, _ = host.open_notebook("you", "doc", run)
            _remember(host, notebook.id, f"text of run {run}")
            ids.append(notebook.id)
    finally:
        close_host(host)
    shutil.copytree(data, tmp_path / "backup")
    host = open_host(Locations(data), clock=clock)
    try:
        host.forget("you", ids[0])
        host.forget("you", ids[1])
    finally:
        close_host(host)
    shutil.rmtree(data)
    shutil.copytree(tmp_path / "backup", data)
    return {"data": data, "keys": tmp_path / "data-keys", "forgotten": ids[:2], "kept": ids[2]}


def _oh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*oh_command(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_verify_reports_each_forgotten_notebook_and_goes_on(restored: dict[str, Any]) -> None:
    where = ["--data", str(restored["data"]), "--keys", str(restored["keys"])]
    done = _oh("verify", *where)
    assert done.returncode == 0, done.stdout + done.stderr
    for notebook_id in restored["forgotten"]:
        line = f"{notebook_id}: purged: no data key (forgotten); its rows cannot be read"
        assert line in done.stdout
    assert done.stdout.rstrip().endswith("; 2 forgotten: OK"), done.stdout
    as_json = json.loads(_oh("verify", "--json", *where).stdout)
    assert as_json["ok"] is True
    assert sorted(as_json["memory"]["forgotten"]) == sorted(restored["forgotten"])
    assert as_json["memory"]["notebooks"] == 3


def test_verify_still_fails_on_damage_beside_a_forgotten_notebook(
    restored: dict[str, Any],
) -> None:
    conn = sqlite3.connect(restored["data"] / "memory.db")
    conn.execute(
        "UPDATE notebooks SET forgets_at = '2999-01-01T00:00:00.000000Z' WHERE id = ?",
        (restored["kept"],),
    )
    conn.commit()
    conn.close()
    done = _oh("verify", "--data", str(restored["data"]), "--keys", str(restored["keys"]))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{restored['kept']}: seal:" in done.stdout
    assert "purged: no data key (forgotten)" in done.stdout  # still reported, still went on


def test_export_leaves_out_each_forgotten_notebook_and_says_so(
    restored: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "notebooks.jsonl"
    done = _oh(
        "export",
        "--notebooks",
        "--data",
        str(restored["data"]),
        "--keys",
        str(restored["keys"]),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    for notebook_id in restored["forgotten"]:
        assert f"oh export: {notebook_id}: purged: no data key (forgotten); not exported" in (
            done.stderr
        )
    summary = json.loads(done.stderr.strip().splitlines()[-1])
    assert sorted(summary["forgotten"]) == sorted(restored["forgotten"])
    assert summary["notebooks"] == 1
    # One notebook asked for by id is still refused: it cannot be exported, and the caller
    # asked for exactly it.
    alone = _oh(
        "export",
        "--notebook",
        restored["forgotten"][0],
        "--data",
        str(restored["data"]),
        "--keys",
        str(restored["keys"]),
        "--out",
        str(tmp_path / "one.jsonl"),
    )
    assert alone.returncode == 2 and "purged" in alone.stderr


@pytest.fixture
def schema() -> Iterator[Schema]:
    if find_binaries() is None:
        pytest.skip("PostgreSQL server binaries are not installed")
    with fresh_schema(shared_cluster()) as schema:
        yield schema


def test_postgres_verify_and_export_report_a_notebook_whose_key_is_gone(
    schema: Schema, tmp_path: Path
) -> None:
    masters = MasterKeys(MasterKey.generate())
    key_store = tmp_path / "keys" / "keys.db"
    store = PostgresMemoryStore(
        schema.url(), keyring=Keyring(masters, SqliteKeyStore(key_store)), max_size=2
    )
    try:
        gone, kept = open_notebook(store, run="gone"), open_notebook(store, run="kept")
        for notebook_id in (gone, kept):
            write(store, notebook_id, 0, "r-1", add("note:a", "a note"))
        # What a restored base backup holds: the rows of a notebook whose key a forget has
        # since destroyed.
        assert store.keyring is not None
        store.keyring.destroy([gone])
        report = verify_store(store)
        assert report.ok and report.forgotten == [gone], report.to_json()
        exported = export_notebooks(store, io.BytesIO())
        assert exported.forgotten == [gone] and exported.notebooks == 1
    finally:
        store.close()
