"""Installed profiles check fields where records are written: notes through `remember`, reviewed
records through review (SPEC §8, §11)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oh.errors import InvalidArgument
from oh.host import Host
from oh.profiles import shipped_pack
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import FakeClock

DOI = {"title": "Coral recovery", "version_label": "version of record", "doi": "10.1000/XYZ123"}


@pytest.fixture
def host(tmp_path: Path) -> Host:
    host = Host(
        SqliteMemoryStore(tmp_path / "memory.db"),
        SqliteKnowledgeStore(tmp_path / "knowledge.db"),
        SqliteHostRegistry(tmp_path / "knowledge.db"),
        clock=FakeClock(),
    )
    host.register_document("ann", "doc")
    return host


def _remember(host: Host, token: str, fields: object, name: str = "publication_version:a") -> dict:
    notebook_id = host.agent(token)
    version = host._memory.notebook(notebook_id).version
    return host.call_tool(
        token,
        "remember",
        {
            "based_on": version,
            "request_id": f"r-{version}-{name}",
            "changes": [{"op": "add", "record": {"name": name, "text": "x", "fields": fields}}],
        },
    )


def test_until_a_profile_is_installed_fields_are_only_canonical_json(host: Host) -> None:
    notebook, _ = host.open_notebook("ann", "doc", "run-1")
    token = host.agent_token(notebook.id)
    assert _remember(host, token, {"anything": [1, 2.5]})["status"] == "applied"


def test_notes_of_an_installed_kind_are_checked_and_canonicalized(host: Host) -> None:
    host._profiles.install("ann", shipped_pack("research"))
    notebook, _ = host.open_notebook("ann", "doc", "run-1")
    token = host.agent_token(notebook.id)
    refused = _remember(host, token, {**DOI, "doi": "not a doi"})
    assert refused["error"]["code"] == "invalid_argument"
    assert "doi" in refused["error"]["message"]
    applied = _remember(host, token, DOI)
    assert applied["status"] == "applied"
    read = host.call_tool(token, "read", {"name": "publication_version:a"})
    assert read["fields"]["doi"] == "10.1000/xyz123"  # DOIs are case-insensitive: one form
    other_kind = _remember(host, token, {"free": "form"}, name="lead:b")
    assert other_kind["status"] == "applied"  # notes of other kinds stay free


def test_a_notebook_checks_against_the_profiles_at_its_pin(host: Host) -> None:
    early, _ = host.open_notebook("ann", "doc", "run-early")
    host._profiles.install("ann", shipped_pack("research"))
    token = host.agent_token(early.id)
    assert _remember(host, token, {**DOI, "doi": "not a doi"})["status"] == "applied"


def test_reviewed_records_use_installed_kinds_with_valid_fields(host: Host) -> None:
    host._profiles.install("ann", shipped_pack("research"))
    with pytest.raises(InvalidArgument):
        host._review.propose("ann", source=SOURCE, record={"name": "lead:x", "text": "guess"})
    with pytest.raises(InvalidArgument):
        host._review.propose(
            "ann",
            source=SOURCE,
            record={"name": "publication_version:a", "text": "x", "fields": {**DOI, "doi": "bad"}},
        )
    proposal = host._review.propose(
        "ann", source=SOURCE, record={"name": "publication_version:a", "text": "x", "fields": DOI}
    )
    with pytest.raises(InvalidArgument):
        host._review.decide(
            "ann",
            proposal.id,
            decision="accept",
            reason="r",
            record={"name": "publication_version:a", "text": "x", "fields": {**DOI, "doi": "bad"}},
        )
    decided = host._review.decide("ann", proposal.id, decision="accept", reason="checked")
    assert decided.record is not None
    assert decided.record.verified_content()["fields"]["doi"] == "10.1000/xyz123"
