"""The recall tool through the host: shadow by default, rows only when switched on, never text,
and nothing left of a forgotten notebook's vectors."""

from __future__ import annotations

import json
from pathlib import Path

from oh.config import Locations, open_host, open_recall
from oh.host import HostSettings
from oh.testing.lifecycle import FakeClock


def _host(tmp_path: Path, shadow: bool):  # type: ignore[no-untyped-def]
    locations = Locations.resolve(str(tmp_path))
    clock = FakeClock()  # one clock for the host and its recall: open means open to both
    recall = open_recall(locations, clock=clock)
    host = open_host(
        locations, settings=HostSettings(recall_shadow=shadow), recall=recall, clock=clock
    )
    host.register_document("ann", "doc")
    notebook, _ = host.open_notebook("ann", "doc", "run-1")
    token = host.agent_token(notebook.id)
    notes = [
        ("lead:reef-survey", "coral reef recovery survey, methods missing"),
        ("dataset:tides", "tide gauge records 1990 to 2014"),
    ]
    host.call_tool(
        token,
        "remember",
        {
            "based_on": 0,
            "request_id": "r",
            "changes": [
                {"op": "add", "record": {"name": name, "text": text}} for name, text in notes
            ],
        },
    )
    recall.catch_up_all()
    return host, token, notebook.id


def test_shadow_recall_computes_and_measures_but_shows_nothing(tmp_path: Path) -> None:
    host, token, _ = _host(tmp_path, shadow=True)
    answer = host.call_tool(token, "recall", {"text": "reef recovery"})
    assert answer == {"rows": [], "shadow": True, "pending": 0}
    # Measured off the request path, by the host's shadow worker.
    assert host.shadow_recall is not None and host.shadow_recall.drain(30)
    assert 'event="recall_shadow_rows"' in host.metrics.render()


def test_recall_when_on_returns_names_digests_and_scores_only(tmp_path: Path) -> None:
    host, token, _ = _host(tmp_path, shadow=False)
    answer = host.call_tool(token, "recall", {"text": "coral reef recovery", "limit": 2})
    assert answer["shadow"] is False
    assert answer["rows"][0]["name"] == "lead:reef-survey"
    assert set(answer["rows"][0]) == {"name", "digest", "origin", "score"}
    assert "methods missing" not in json.dumps(answer)


def test_forgetting_drops_the_notebooks_vectors(tmp_path: Path) -> None:
    host, token, notebook_id = _host(tmp_path, shadow=False)
    host.forget("ann", notebook_id)
    assert host.call_tool(token, "recall", {"text": "reef"})["error"]["code"] == "purged"
    from oh.storage.sqlite.vectors import SqliteVectorStore

    vectors = SqliteVectorStore(tmp_path / "memory.db")
    assert vectors.note_digests(notebook_id, "oh-hashing-v1-384") == []


def test_recall_embeds_and_finds_the_notes_of_a_sealed_notebook(tmp_path: Path) -> None:
    """With a master key the notes are sealed at rest (docs/keys.md); recall still reads them
    opened, embeds them and finds them, and their text is in no file."""
    from oh.config import start_master_key

    locations = Locations.resolve(str(tmp_path / "data"))
    locations.prepare()
    assert start_master_key(locations) is not None
    host, token, _ = _host(tmp_path / "data", shadow=False)
    answer = host.call_tool(token, "recall", {"text": "coral reef survey"})
    assert answer["rows"][0]["name"] == "lead:reef-survey"
    for path in (tmp_path / "data").iterdir():
        assert b"methods missing" not in path.read_bytes(), path
