"""``oh demo``: the reef-recovery walk-through against a fresh embedded store."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from oh.core.changes import Applied, parse_changes
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.verify import verify_store

__all__ = ["run_demo"]


def _show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def run_demo(data_dir: Path, say: Callable[[str], None]) -> bool:
    """Walk through the example, telling ``say`` each step (``oh demo`` prints them); return
    whether ``verify`` passed."""
    data_dir.mkdir(parents=True, exist_ok=True)
    store = SqliteMemoryStore(data_dir / "memory.db")
    try:
        return _walk(store, data_dir, say)
    finally:
        store.close()


def _walk(store: SqliteMemoryStore, data_dir: Path, say: Callable[[str], None]) -> bool:
    author = "agent:reef-run-1"
    notebook = Notebooks(store).open("researcher", "reef-recovery-question", "reef-run-1")
    notebook_id = notebook.id
    say(f"Memory database: {data_dir / 'memory.db'}")
    say(
        f"1. A research assistant starts run reef-run-1 on 'reef-recovery-question': notebook "
        f"{notebook.id}, version {notebook.version}, forgets at {notebook.forgets_at}."
    )

    def remember(step: str, based_on: int, request_id: str, changes: list[Any]) -> Any:
        result = store.remember(
            notebook_id,
            based_on=based_on,
            request_id=request_id,
            changes=parse_changes(changes),
            author=author,
            now=datetime.now(UTC),
        )
        say(
            f"{step}\n   remember(based_on={based_on}, request_id={request_id!r}) -> "
            f"{_show(result.to_json())}"
        )
        return result

    survey = {
        "name": "lead:reef-survey-2016",
        "text": "The 2016 reef survey's methods section is missing; do not rely on its numbers.",
    }
    dataset = {
        "name": "dataset:coral-cover-1990-2014",
        "text": "Dataset ends 2014: ruled out, the question needs recovery after 2016.",
    }
    figure = {
        "name": "todo:check-figure-3",
        "text": "Check figure 3 of the survey against the second paper's recovery curve.",
        "depends_on": ["lead:reef-survey-2016"],
    }
    remember(
        "2. It notes the survey with the missing methods section.",
        0,
        "r-1",
        [{"op": "add", "record": survey}],
    )
    remember(
        "3. It notes a figure to check against a second paper.",
        1,
        "r-2",
        [{"op": "add", "record": figure}],
    )
    first = remember(
        "4. It rules out a dataset that stops in 2014.",
        2,
        "r-3",
        [{"op": "add", "record": dataset}],
    )
    again = remember(
        "5. The call timed out on the agent's side, so it retries the same request.",
        2,
        "r-3",
        [{"op": "add", "record": dataset}],
    )
    entries = sum(1 for _ in store.log(notebook_id))
    say(f"   same result as before: {again == first}; log entries: {entries}")

    replaced = dict(figure, text="Figure 3 checked: the second paper agrees within 5%.")
    remember(
        "6. A stale step still believes memory is at version 2 and tries to write.",
        2,
        "r-4",
        [{"op": "replace", "record": replaced}],
    )
    current = store.notebook(notebook_id).version
    names = [record.name for record in store.records(notebook_id)]
    say(f"7. It reads memory again: version {current}, notes {names}.")
    final = remember(
        "8. It writes again, based on what it just read.",
        current,
        "r-4",
        [{"op": "replace", "record": replaced}],
    )

    report = verify_store(store)
    say(
        f"9. verify: replayed {report.entries} log entries of {report.notebooks} notebook(s), "
        f"checked the hash chain and {report.records} digests: "
        + ("OK" if report.ok else f"{len(report.problems)} problem(s)")
    )
    for problem in report.problems:
        say(f"   {problem.what}: {problem.detail}")
    return report.ok and isinstance(final, Applied)
