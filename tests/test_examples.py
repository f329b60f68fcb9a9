"""The embedding example, `examples/sponge/`: run as a user runs it, and its pieces one by one.

A host that embeds Oh keeps the duties `oh serve` would keep (docs/embedding.md): it rechecks
ownership on every tool call, stamps author and time, opens a notebook per run, hands the agent
Oh's published schemas, and lets only the document's owner see, forget and review a run's
notes. Each rule has a test here, against the example's real modules over real databases.
"""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from oh import SqliteMemoryStore
from oh.config import Locations, open_knowledge_store, open_memory_store
from oh.errors import Forbidden, NotFound, StorageUnavailable
from oh.tools.schemas import ARGUMENTS

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sponge"
GUIDE = ROOT / "docs" / "embedding.md"
START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def run_example(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE / "app.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def oh_verify(data: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", "verify", "--data", str(data), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout))


def guide_blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)


# -- run as a user runs it ----------------------------------------------------------------------


def test_the_example_tells_its_story_and_leaves_data_that_oh_verify_passes(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "sponge"
    done = run_example(str(directory), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    lines = [line.strip() for line in out.splitlines()]
    # A retry returns the original result; a stale write is refused, then applied after a read.
    retry = (
        "run-1 remember(based on 0, r-1: add lead:reef-survey-2016, add lead:dataset-2014)"
        " -> applied: memory is at version 1"
    )
    assert lines.count(retry) == 2
    assert (
        "run-1 remember(based on 1, r-3: replace lead:reef-survey-2016)"
        " -> refused (stale): memory is at version 2"
    ) in lines
    assert (
        "run-1 remember(based on 2, r-4: replace lead:reef-survey-2016)"
        " -> applied: memory is at version 3"
    ) in lines
    # The forgotten run's agent is refused; ownership moving mid-run refuses the next call.
    assert any(re.fullmatch(r"run-1 query\(current_notes\) -> purged: .*", line) for line in lines)
    assert "run-2 query(current_notes) -> forbidden: ann no longer owns reef-recovery" in lines
    assert "Ann opens the Memory panel of run-2: not_found" in lines
    assert lines[-2].startswith("Oh's verify: ") and lines[-2].endswith(": OK")
    # The transcript in the guide is what the example prints, in that order.
    (shown,) = guide_blocks("text")
    position = 0
    for line in shown.strip().splitlines():
        position = lines.index(line.strip(), position) + 1

    report = oh_verify(directory / "oh")
    assert report["ok"] and report["memory"]["notebooks"] == 3
    assert report["knowledge"]["entries"] == 1

    # Sponge sealed its notes with the keys beside its data: open them as it does.
    assert (directory / "oh-keys" / "master.key").is_file()
    with pytest.raises(StorageUnavailable, match="sealed"):
        SqliteMemoryStore(directory / "oh" / "memory.db")  # never opened without them
    memory = open_memory_store(Locations(directory / "oh", create=False))
    knowledge = open_knowledge_store(Locations(directory / "oh", create=False))
    try:
        run1 = memory.find_notebook("ann", "reef-recovery", "run-1")
        run2 = memory.find_notebook("ann", "reef-recovery", "run-2")
        run3 = memory.find_notebook("bob", "reef-recovery", "run-3")
        assert run1 is not None and run2 is not None and run3 is not None
        assert run1.state == "purged" and memory.records(run1.id) == []
        (todo,) = memory.records(run2.id)
        # Sponge stamped who and when: the run's author, the injected clock the next day.
        assert (todo.name, todo.author) == ("todo:second-paper", "agent:run-2")
        assert todo.written_at.startswith("2026-09-02T")
        assert run2.pinned_revision == 1 and run3.pinned_revision == 0
        # The reviewed note outlived its forgotten notebook, with its source and decision.
        (reviewed,) = knowledge.records_at("ann", 1)
        assert reviewed.name == "lead:dataset-2014" and reviewed.author == "ann"
        assert reviewed.source.locator == "p. 2" and reviewed.decision.by == "ann"
        assert knowledge.latest_revision("bob") == 0
    finally:
        memory.close()
        knowledge.close()
    with sqlite3.connect(directory / "sponge.db") as library:
        owner = library.execute("SELECT owner FROM documents WHERE id = 'reef-recovery'")
        assert owner.fetchone() == ("bob",)


def test_the_example_refuses_a_directory_that_is_not_empty_and_changes_nothing(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    done = run_example(str(tmp_path), cwd=tmp_path)
    assert done.returncode == 2 and "is not empty" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_embedding_needs_only_the_base_install() -> None:
    """No server, MCP or recall package is imported: Oh with no extra (``oh-memory``) is enough."""
    script = (
        f"import json, sys; sys.path.insert(0, {str(EXAMPLE)!r}); import agent_memory, app\n"
        "loaded = {name.split('.')[0] for name in sys.modules}\n"
        "print(json.dumps(sorted(loaded - set(sys.stdlib_module_names))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(json.loads(done.stdout))
    ours = {"__main__", "_distutils_hack", "agent_memory", "app", "library", "oh"}
    # cryptography seals notebooks (docs/keys.md); _cffi_backend and _openssl are its own parts
    base = {"cryptography", "_cffi_backend", "_openssl", "fastjsonschema", "libsql", "rfc8785"}
    assert loaded - ours <= base, loaded


def test_every_code_excerpt_in_the_guide_is_taken_from_the_example() -> None:
    sources = [
        [line.strip() for line in path.read_text().splitlines() if line.strip()]
        for path in sorted(EXAMPLE.glob("*.py"))
    ]
    blocks = guide_blocks("python")
    assert len(blocks) >= 5
    for block in blocks:
        excerpt = [line.strip() for line in block.splitlines() if line.strip()]
        found = any(
            source[i : i + len(excerpt)] == excerpt
            for source in sources
            for i in range(len(source) - len(excerpt) + 1)
        )
        assert found, f"not in examples/sponge/ as written:\n{block}"


# -- the pieces, imported -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sponge_modules() -> Iterator[tuple[ModuleType, ModuleType]]:
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield importlib.import_module("library"), importlib.import_module("agent_memory")
    finally:
        sys.path.remove(str(EXAMPLE))
        for name in ("library", "agent_memory"):
            sys.modules.pop(name, None)


class Sponge:
    """The example's library and memory over a temporary directory, Ann owning ``doc``."""

    def __init__(self, modules: tuple[ModuleType, ModuleType], directory: Path) -> None:
        library_module, memory_module = modules
        self.clock = Clock()
        self.library = library_module.Library(directory / "sponge.db")
        self.memory = memory_module.AgentMemory(directory / "oh", self.library, clock=self.clock)
        self.library.add_user("ann", "Ann")
        self.library.add_user("bob", "Bob")
        self.library.add_document("doc", "A document", owner="ann")

    def close(self) -> None:
        self.memory.close()
        self.library.close()


@pytest.fixture
def sponge(sponge_modules: tuple[ModuleType, ModuleType], tmp_path: Path) -> Iterator[Sponge]:
    host = Sponge(sponge_modules, tmp_path)
    yield host
    host.close()


def add(name: str, text: str, based_on: int = 0, request_id: str = "r-1") -> dict[str, Any]:
    change = {"op": "add", "record": {"name": name, "text": text}}
    return {"based_on": based_on, "request_id": request_id, "changes": [change]}


def code(result: dict[str, Any]) -> str:
    return str(result["error"]["code"])


def test_every_tool_call_rechecks_that_the_user_still_owns_the_document(sponge: Sponge) -> None:
    run = sponge.memory.start_run("ann", "doc", "run-1")
    assert run.call("remember", add("lead:a", "first"))["status"] == "applied"
    token = run.call("query", {"question": "current_notes"})["token"]
    sponge.library.transfer("doc", "bob")
    calls = [
        ("remember", add("lead:b", "second", based_on=1, request_id="r-2")),
        ("query", {"question": "current_notes"}),
        ("read", {"name": "lead:a"}),
        ("explain", {"token": token, "row": 0}),
    ]
    for tool, arguments in calls:
        assert code(run.call(tool, arguments)) == "forbidden", tool
    assert code(run.bootstrap()) == "forbidden"
    # Decided on each call, not once: given back, the document opens to the same run again,
    # and nothing was written while it was refused.
    sponge.library.transfer("doc", "ann")
    answer = run.call("query", {"question": "current_notes"})
    assert answer["version"] == 1 and [row["name"] for row in answer["rows"]] == ["lead:a"]


def test_a_run_starts_only_on_a_document_the_user_owns(sponge: Sponge) -> None:
    with pytest.raises(Forbidden):
        sponge.memory.start_run("bob", "doc", "run-1")
    with pytest.raises(NotFound):
        sponge.memory.start_run("ann", "no-such-doc", "run-1")
    notes, _ = sponge.memory.verify()
    assert notes.notebooks == 0


def test_only_the_document_owner_sees_forgets_and_proposes_the_runs_notes(sponge: Sponge) -> None:
    run = sponge.memory.start_run("ann", "doc", "run-1")
    run.call("remember", add("lead:a", "a note"))
    source = {"document": "doc", "passage": "A passage.", "locator": "p. 1"}
    for attempt in (
        lambda: sponge.memory.notes("bob", run.notebook_id),
        lambda: sponge.memory.forget("bob", run.notebook_id),
        lambda: sponge.memory.propose("bob", run.notebook_id, "lead:a", source),
    ):
        with pytest.raises(NotFound):
            attempt()
    sponge.library.transfer("doc", "bob")
    with pytest.raises(NotFound):  # Ann lost the document, and Bob never owned the notebook
        sponge.memory.notes("ann", run.notebook_id)
    with pytest.raises(NotFound):
        sponge.memory.notes("bob", run.notebook_id)
    sponge.library.transfer("doc", "ann")
    assert [note.name for note in sponge.memory.notes("ann", run.notebook_id)] == ["lead:a"]


def test_the_host_stamps_author_and_time_and_the_agent_cannot(sponge: Sponge) -> None:
    run = sponge.memory.start_run("ann", "doc", "run-7")
    sponge.clock.now = START + timedelta(minutes=5)
    for forged in ({"author": "ann"}, {"written_at": "2020-01-01T00:00:00.000000Z"}):
        change = {"op": "add", "record": {"name": "lead:a", "text": "x", **forged}}
        request = {"based_on": 0, "request_id": "r-1", "changes": [change]}
        assert code(run.call("remember", request)) == "invalid_argument"
    assert run.call("remember", add("lead:a", "x"))["version"] == 1
    (stored,) = sponge.memory.notes("ann", run.notebook_id)
    assert stored.author == "agent:run-7"
    assert stored.written_at == "2026-09-01T09:05:00.000000Z"


def test_the_model_is_given_ohs_published_schemas_for_exactly_four_tools(
    sponge: Sponge, sponge_modules: tuple[ModuleType, ModuleType]
) -> None:
    run = sponge.memory.start_run("ann", "doc", "run-1")
    definitions = run.definitions()
    assert [d["name"] for d in definitions] == ["remember", "query", "read", "explain"]
    assert all(d["parameters"] == ARGUMENTS[d["name"]] and d["description"] for d in definitions)
    assert code(run.call("recall", {"text": "reef"})) == "not_found"
    assert code(run.call("bootstrap", None)) == "not_found"
    assert run.bootstrap()["rows"] == []


def test_a_new_run_starts_empty_and_reads_what_the_owner_reviewed(sponge: Sponge) -> None:
    first = sponge.memory.start_run("ann", "doc", "run-1")
    first.call("remember", add("lead:a", "worth keeping"))
    first.call("remember", add("lead:b", "a guess", based_on=1, request_id="r-2"))
    source = {"document": "doc", "passage": "It says so.", "locator": "p. 3"}
    proposal = sponge.memory.propose("ann", first.notebook_id, "lead:a", source)
    assert sponge.memory.accept("ann", proposal.id, "Checked.").revision == 1
    sponge.memory.forget("ann", first.notebook_id)
    assert code(first.call("read", {"name": "lead:a"})) == "purged"
    second = sponge.memory.start_run("ann", "doc", "run-2")
    assert [(r["origin"], r["name"]) for r in second.bootstrap()["rows"]] == [
        ("reviewed", "lead:a")
    ]
    assert code(second.call("read", {"name": "lead:b"})) == "not_found"
