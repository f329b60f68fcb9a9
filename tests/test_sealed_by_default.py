"""Sealed is the only default: every way of opening the stores that the docs show seals.

``open_host(Locations(dir))`` (the quickstart's library host) makes the master key beside the
data exactly as ``oh serve`` does, says so on standard error, and keeps no note text in plain
text; ``oh key status`` then shows the key. Plain storage takes the one explicit opt-out, which
warns. Recall wired as docs/recall.md shows finds the notes of a sealed notebook, and a vector
store over sealed notes without the memory store's keys is refused, loudly.
"""

from __future__ import annotations

import json
import subprocess
import warnings
from pathlib import Path

import pytest

from oh.config import (
    Locations,
    UnsealedWarning,
    close_host,
    open_host,
    open_knowledge_store,
    open_memory_store,
)
from oh.errors import StorageUnavailable
from oh.recall import HashingEmbedder, Recall
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.lifecycle import FakeClock
from oh.testing.served import oh_command

TEXT = "zsealeddefault gauge seven drifts after the storm"
CLOCK = FakeClock()  # every service on one injected timeline


def _write(data: Path, **options: bool) -> str:
    host = open_host(Locations(data, **options), clock=CLOCK)
    try:
        host.register_document("you", "report-43")
        notebook, _ = host.open_notebook("you", "report-43", "run-1")
        written = host.call_tool(
            host.agent_token(notebook.id),
            "remember",
            {
                "based_on": notebook.version,
                "request_id": "r-1",
                "changes": [{"op": "add", "record": {"name": "lead:tide-gauge", "text": TEXT}}],
            },
        )
        assert written["status"] == "applied", written
        return notebook.id
    finally:
        close_host(host)


def _plain_in(directory: Path) -> list[str]:
    needle = TEXT.encode()
    return [p.name for p in directory.iterdir() if p.is_file() and needle in p.read_bytes()]


def test_the_quickstart_library_host_seals_and_makes_the_key_beside_the_data(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "my-app-data"
    _write(data)
    err = capfd.readouterr().err
    keys = tmp_path / "my-app-data-keys"
    assert f"oh: created the master key {(keys / 'master.key').resolve()}" in err
    assert "back up the master key file" in err
    assert _plain_in(data) == []
    status = subprocess.run(
        [*oh_command(), "key", "status", "--json", "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(status.stdout)
    assert shown["master_key_id"] is not None and sum(shown["data_keys"].values()) == 1
    close_host(open_host(Locations(data), clock=CLOCK))  # again: the same key, said nothing
    assert "created the master key" not in capfd.readouterr().err


def test_plain_storage_is_only_the_explicit_opt_out_and_it_warns(tmp_path: Path) -> None:
    data = tmp_path / "plain"
    with pytest.warns(UnsealedWarning, match="plain text"):
        _write(data, sealed=False)
    assert _plain_in(data) != []  # as asked, and warned
    assert not (tmp_path / "plain-keys").exists()


def test_recall_wired_as_the_docs_show_finds_the_notes_of_a_sealed_notebook(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    notebook_id = _write(data)
    locations = Locations(data)
    memory = open_memory_store(locations)
    knowledge = open_knowledge_store(locations)
    vectors = SqliteVectorStore(data / "memory.db")
    try:
        # docs/recall.md, as written: the vector store gets no keys of its own.
        recall = Recall(memory, vectors, HashingEmbedder(), knowledge, clock=CLOCK)
        recall.catch_up_all()
        found = recall.recall(notebook_id, "gauge drifts after the storm", limit=5)
        assert [row["name"] for row in found["rows"]] == ["lead:tide-gauge"], found
        assert found["pending"] == 0
    finally:
        vectors.close()
        knowledge.close()
        memory.close()


def test_a_vector_store_over_sealed_notes_without_their_keys_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    notebook_id = _write(data)
    vectors = SqliteVectorStore(data / "memory.db")
    try:
        with pytest.raises(StorageUnavailable, match="sealed"):
            vectors.read_with(None)
        with pytest.raises(StorageUnavailable, match="sealed"):
            vectors.pending_notes(notebook_id, "any-model", 10)
        # Nor is a plain vector ever written beside sealed ones, nor a stored one read as plain.
        with pytest.raises(StorageUnavailable, match="sealed"):
            vectors.put_note_vectors(notebook_id, "any-model", [("lead:tide-gauge", "d", b"v")])
        with pytest.raises(StorageUnavailable, match="sealed"):
            vectors.note_vectors(notebook_id, "any-model", ["d"])
    finally:
        vectors.close()


def test_no_warning_on_the_sealed_default(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsealedWarning)
        _write(tmp_path / "data")
