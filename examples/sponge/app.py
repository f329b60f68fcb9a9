"""Sponge, a document library, gives its agents working memory with Oh embedded as a library.

    .venv/bin/python examples/sponge/app.py [DIR]

DIR (new or empty; by default a new temporary directory, which is kept) receives Sponge's own
``sponge.db`` and Oh's data directory ``oh/``; ``oh verify --data DIR/oh`` checks the latter.
A scripted agent stands in for a model, and every time comes from an injected clock, so the
transcript is the same on every run.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agent_memory import AgentMemory, AgentRun
from library import Library

from oh.errors import OhError

Say = Callable[[str], None]
ToolCall = Callable[[str, Any], dict[str, Any]]

START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
DOCUMENT = "reef-recovery"


class Clock:
    """Sponge's clock, as Oh is given it: it moves only when told."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def tick(self, minutes: int = 1) -> None:
        self.now += timedelta(minutes=minutes)


# -- a scripted agent in place of a model -------------------------------------------------------


def note(op: str, name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": op, "record": {"name": name, "text": text, **links}}


def remember(based_on: int, request_id: str, *changes: dict[str, Any]) -> dict[str, Any]:
    return {"based_on": based_on, "request_id": request_id, "changes": list(changes)}


def first_hours(call: ToolCall, say: Say) -> None:
    """Run 1: notes about a reef-recovery question, a retry, and two steps that race."""
    first = remember(
        0,
        "r-1",
        note("add", "lead:reef-survey-2016", "The 2016 survey has no methods section."),
        note("add", "lead:dataset-2014", "The monitoring dataset ends in 2014: ruled out."),
    )
    call("remember", first)
    say("   (the reply was lost to a timeout: the runtime sends r-1 again, unchanged)")
    call("remember", first)
    say("   (two steps both read version 1; the first one's write lands...)")
    figure = note(
        "add",
        "check:figure-3",
        "Check figure 3 of the survey against a second paper.",
        depends_on=["lead:reef-survey-2016"],
    )
    call("remember", remember(1, "r-2", figure))
    say("   (...so the second one's, based on version 1, is refused: it reads again, retries)")
    replace = note(
        "replace", "lead:reef-survey-2016", "The 2016 survey has no methods section; see p. 4."
    )
    refused = call("remember", remember(1, "r-3", replace))
    if refused.get("status") == "refused":
        current = call("query", {"question": "current_notes"})
        call("remember", remember(current["version"], "r-4", replace))
    call("read", {"name": "lead:dataset-2014"})
    dependents = call("query", {"question": "dependents", "name": "lead:reef-survey-2016"})
    call("explain", {"token": dependents["token"], "row": 0})


# -- the transcript -------------------------------------------------------------------------------


def hhmm(stamp: str) -> str:
    """``09:01`` of an Oh time stamp (``2026-09-01T09:01:00.000000Z``)."""
    return stamp[11:16]


def day(stamp: str) -> str:
    return f"{stamp[:10]} {hhmm(stamp)} UTC"


def rows(count: int) -> str:
    return f"{count} row" if count == 1 else f"{count} rows"


def summary(tool: str, result: dict[str, Any]) -> str:
    """One line of what a tool answered, as a person reading the transcript needs it."""
    if "error" in result:
        return f"{result['error']['code']}: {result['error']['message']}"
    if tool == "remember":
        if result["status"] == "refused":
            return f"refused ({result['reason']}): memory is at version {result['current_version']}"
        return f"applied: memory is at version {result['version']}"
    if tool in ("query", "bootstrap"):
        names = ", ".join(f"{row['origin']} {row['name']}" for row in result["rows"]) or "none"
        return f"{rows(len(result['rows']))} at version {result['version']}: {names}"
    if tool == "read":
        if result["origin"] == "reviewed":
            return f"reviewed, accepted by {result['decision']['by']}: {result['text']!r}"
        return f"{result['text']!r} by {result['author']} at {hhmm(result['written_at'])}"
    if tool == "explain":
        return str(result["reason"])
    return str(result)


def arguments_in_brief(tool: str, arguments: dict[str, Any]) -> str:
    if tool == "remember":
        names = ", ".join(
            f"{c['op']} {c['record']['name'] if 'record' in c else c['name']}"
            for c in arguments["changes"]
        )
        return f"based on {arguments['based_on']}, {arguments['request_id']}: {names}"
    if tool == "explain":
        return f"row {arguments['row']}"
    return " ".join(str(v) for k, v in arguments.items() if k != "token")


def traced(run: AgentRun, clock: Clock, say: Say) -> ToolCall:
    """The agent runtime's side: each call goes to Sponge, a minute apart, and is shown."""

    def call(tool: str, arguments: Any) -> dict[str, Any]:
        clock.tick()
        result = run.call(tool, arguments)
        say(
            f"   {run.run} {tool}({arguments_in_brief(tool, arguments)}) -> {summary(tool, result)}"
        )
        return result

    return call


def walk(directory: Path, say: Say) -> bool:
    """The whole story; True when Oh's verify passes on the data it left."""
    clock = Clock(START)
    library = Library(directory / "sponge.db")
    memory = AgentMemory(directory / "oh", library, clock=clock)
    try:
        library.add_user("ann", "Ann Reyes")
        library.add_user("bob", "Bob Chen")
        library.add_document(DOCUMENT, "Reef recovery after the 2016 bleaching", owner="ann")
        say(f"Sponge's own data: {directory / 'sponge.db'}; Oh's: {directory / 'oh'}")

        say(f"1. Ann asks the research assistant about {DOCUMENT}; Sponge starts run-1.")
        run1 = memory.start_run("ann", DOCUMENT, "run-1")
        tools = ", ".join(tool["name"] for tool in run1.definitions())
        say(f"   run-1 gets a notebook of its own, which forgets at {day(run1.forgets_at)}")
        say(f"   tools: {tools}; bootstrap: {summary('bootstrap', run1.bootstrap())}")

        say("2. The agent works; Sponge rechecks Ann's ownership and stamps every call.")
        first_hours(traced(run1, clock, say), say)

        say("3. Ann opens the Memory panel of run-1.")
        clock.tick(30)
        for stored in memory.notes("ann", run1.notebook_id):
            say(f"   {stored.name}, version {stored.version}, by {stored.author}"
                f" at {hhmm(stored.written_at)}")  # fmt: skip
        passage = "Monitoring at all twelve sites ceased in December 2014."
        source = {"document": DOCUMENT, "passage": passage, "locator": "p. 2"}
        proposal = memory.propose("ann", run1.notebook_id, "lead:dataset-2014", source)
        say(f"   Ann proposes lead:dataset-2014 for review, citing p. 2: {proposal.state}")
        reviewed = memory.accept("ann", proposal.id, "The dataset's own notes say so.")
        say(f"   Ann accepts it: reviewed knowledge at revision {reviewed.revision}")
        removed = memory.forget("ann", run1.notebook_id).removed
        say(f"   Ann forgets run-1 now: {removed['records']} notes, {removed['log']} log entries")
        traced(run1, clock, say)("query", {"question": "current_notes"})

        say("4. The next day a new run starts empty, with only what Ann reviewed.")
        clock.tick(24 * 60)
        run2 = memory.start_run("ann", DOCUMENT, "run-2")
        say(f"   run-2 is pinned at revision {run2.pinned_revision};"
            f" bootstrap: {summary('bootstrap', run2.bootstrap())}")  # fmt: skip
        call = traced(run2, clock, say)
        call("read", {"name": "lead:dataset-2014"})
        call("remember", remember(0, "r-1", note("add", "todo:second-paper", "Find a 2019 paper.")))

        say("5. Mid-run, the document passes from Ann to Bob.")
        library.transfer(DOCUMENT, "bob")
        call("query", {"question": "current_notes"})
        try:
            memory.notes("ann", run2.notebook_id)
        except OhError as error:
            say(f"   Ann opens the Memory panel of run-2: {error.code}")
        run3 = memory.start_run("bob", DOCUMENT, "run-3")
        say(
            f"   Bob starts run-3, from his own knowledge: {summary('bootstrap', run3.bootstrap())}"
        )

        notes, knowledge = memory.verify()
        verdict = "OK" if notes.ok and knowledge.ok else "FAILED"
        say(f"Oh's verify: {notes.notebooks} notebooks, {notes.entries} log entries,"
            f" {knowledge.entries} knowledge revisions: {verdict}")  # fmt: skip
        for problem in notes.problems + knowledge.problems:
            say(f"   {problem.notebook_id}: {problem.what}: {problem.detail}")
        # The ``oh`` beside this Python: after a checkout's install it is not on PATH.
        oh = Path(sys.executable).with_name("oh")
        command = shlex.quote(str(oh)) if oh.is_file() else "oh"
        say(f"Check it yourself: {command} verify --data {shlex.quote(str(directory / 'oh'))}")
        return notes.ok and knowledge.ok
    finally:
        memory.close()
        library.close()


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        print("usage: app.py [DIR]", file=sys.stderr)
        return 2
    directory = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="sponge-"))
    if directory.exists() and any(directory.iterdir()):
        print(f"app.py: {directory} is not empty; give a new or empty directory", file=sys.stderr)
        return 2
    directory.mkdir(parents=True, exist_ok=True)
    return 0 if walk(directory, print) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
