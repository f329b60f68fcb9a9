"""The task every integration example gives its agent, and the scripted model that can do it.

Each example (``agents_sdk_agent.py``, ``pydantic_ai_agent.py``, ``langgraph_agent.py``) connects
its framework's agent to a notebook of ``oh serve`` over MCP and gives it ``INSTRUCTIONS`` and
``TASK``. A real model decides on its own what to call. With ``--scripted`` the model is
``next_move`` instead: a function of the tool results the framework handed back so far, which
returns the next tool call or the final answer. It needs no network and no API key, and it
plays the part a careful agent plays with Oh:

1. ``remember`` a lead on version 0 (a new notebook is at version 0);
2. ``remember`` a finding that depends on it, again on version 0, which is now outdated:
   Oh refuses it as ``stale`` and names the current version;
3. ``read`` the lead again (someone moved memory on: look before writing);
4. ``remember`` the finding on the current version: it is applied;
5. ``query`` what the finding depends on; 6. ``read`` the row that came back, with the digest
   the query gave (the answer says whether it changed); 7. ``explain`` why that row came back.

This module uses only the standard library, so every example can import it from any virtual
environment.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LEAD = "lead:reef-survey-2016"
FINDING = "finding:reef-recovery"

# The OpenAI model a real run uses unless told otherwise: the OpenAI Agents SDK's default, and
# the same variable that SDK reads to change it.
OPENAI_MODEL = os.environ.get("OPENAI_DEFAULT_MODEL", "gpt-5.6-luna")

INSTRUCTIONS = """\
You keep working notes in Oh, a memory of your own for this run, through its tools.
- Every write is `remember` with `based_on` (the memory version you last saw), a new
  `request_id` and a list of changes, e.g. {"op": "add", "record": {"name": "lead:x",
  "text": "..."}}. A note's name is `kind:slug`, lower case.
- A new notebook is at version 0; `query` with {"question": "current_notes"} tells the
  current version and what is there.
- If `remember` answers {"status": "refused", "reason": "stale", "current_version": N},
  memory moved on since you looked: `read` again what your change depends on, then send
  the change again with `based_on` N and a new `request_id`.
- `query` with {"question": "depends_on", "name": ...} lists what a note depends on. Its
  answer carries a `token`: `explain` with that token and a row number says why that row
  came back.
"""

TASK = f"""\
Write down a lead: {LEAD}, "The 2016 reef survey may show coral cover recovering." Then note
a finding, {FINDING}, "Coral cover recovered by 2019.", which depends on the lead. Then ask
what the finding depends on, read what came back, and explain why it came back.
"""

_LEAD_RECORD = {"name": LEAD, "text": "The 2016 reef survey may show coral cover recovering."}
_FINDING_RECORD = {"name": FINDING, "text": "Coral cover recovered by 2019.", "depends_on": [LEAD]}


@dataclass(frozen=True)
class Call:
    """The next tool call: a tool name and its arguments."""

    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    """The final answer: the run ends."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """One tool call of a run as the framework recorded it, with the result the agent saw."""

    tool: str
    arguments: dict[str, Any]
    result: dict[str, Any]


@dataclass
class Transcript:
    """What a run did: its tool uses in order and the final answer."""

    tool_uses: list[ToolUse] = field(default_factory=list)
    answer: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "tool_uses": [
                {"tool": use.tool, "arguments": use.arguments, "result": use.result}
                for use in self.tool_uses
            ],
            "answer": self.answer,
        }


def next_move(results: Sequence[Mapping[str, Any]]) -> Call | Answer:
    """The scripted model: the next move after these tool results (oldest first)."""
    step = len(results)
    last = results[-1] if results else {}
    if "error" in last:
        hint = ""
        if last["error"].get("code") == "request_id_reused":
            # The script's request ids are fixed: a notebook it already worked has them.
            hint = " (the scripted run needs a notebook of its own: open one for a new --run)"
        return Answer(f"Stopped: step {step} answered {json.dumps(last['error'])}{hint}")
    if step == 0:
        return _remember(0, "lead-1", _LEAD_RECORD)
    if step == 1:
        # The version this run started from, which the first write has made outdated.
        return _remember(0, "finding-1", _FINDING_RECORD)
    if step == 2:
        if last.get("reason") != "stale":
            return Answer(f"Expected a stale refusal, got {json.dumps(last)}")
        return Call("read", {"name": LEAD})
    if step == 3:
        current = results[1]["current_version"]
        return _remember(current, "finding-2", _FINDING_RECORD)
    if step == 4:
        return Call("query", {"question": "depends_on", "name": FINDING})
    if step == 5:
        if not results[4]["rows"]:
            return Answer(f"Nothing came back for what {FINDING} depends on")
        row = results[4]["rows"][0]
        return Call("read", {"name": row["name"], "digest": row["digest"]})
    if step == 6:
        return Call("explain", {"token": results[4]["token"], "row": results[4]["rows"][0]["row"]})
    return Answer(
        f"{FINDING} depends on {results[5]['name']} (memory version {results[4]['version']}): "
        f"{last.get('reason')}"
    )


def _remember(based_on: int, request_id: str, record: dict[str, Any]) -> Call:
    return Call(
        "remember",
        {
            "based_on": based_on,
            "request_id": request_id,
            "changes": [{"op": "add", "record": record}],
        },
    )


_TEXT_BLOCKS = ("text", "input_text")


def result_object(content: Any) -> dict[str, Any]:
    """A tool result as a JSON object, from the shapes frameworks hand tool output on in.

    Oh answers every tool call with one JSON object, sent as text content and as structured
    content. Frameworks pass on one or the other: the object itself, its JSON text, a text
    block ``{"type": "text", "text": ...}`` (``input_text`` in the OpenAI Responses format), or
    a list holding one such block.
    """
    if isinstance(content, Mapping):
        if content.get("type") in _TEXT_BLOCKS and isinstance(content.get("text"), str):
            return result_object(content["text"])
        return dict(content)
    if isinstance(content, str):
        value = json.loads(content)
        if isinstance(value, dict):
            return value
    if isinstance(content, Sequence) and not isinstance(content, str) and len(content) == 1:
        return result_object(content[0])
    raise ValueError(f"not a tool result object: {content!r}")


def parse_options(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options every example takes; the MCP URL and agent token can come from the
    environment, as ``oh notebook open`` prints them."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--mcp-url",
        default=os.environ.get("OH_MCP_URL", "http://127.0.0.1:8765/mcp"),
        help="the MCP URL `oh notebook open` printed (env OH_MCP_URL)",
    )
    parser.add_argument(
        "--agent-token",
        default=os.environ.get("OH_AGENT_TOKEN"),
        help="the notebook's agent token `oh notebook open` printed (env OH_AGENT_TOKEN)",
    )
    parser.add_argument(
        "--model", help=f"the model to use (default: the OpenAI model {OPENAI_MODEL})"
    )
    parser.add_argument(
        "--scripted",
        action="store_true",
        help="use the scripted model instead of a real one: no network, no API key",
    )
    parser.add_argument("--json", action="store_true", help="print the transcript as JSON")
    options = parser.parse_args(argv)
    if not options.agent_token:
        parser.error("give the agent token: --agent-token or OH_AGENT_TOKEN")
    if not options.scripted and options.model is None and not os.environ.get("OPENAI_API_KEY"):
        parser.error("set OPENAI_API_KEY (or choose a model with --model), or pass --scripted")
    return options


def show(transcript: Transcript, *, as_json: bool) -> None:
    """Print what the run did: one line per tool use and the answer, or JSON."""
    if as_json:
        json.dump(transcript.as_json(), sys.stdout)
        sys.stdout.write("\n")
        return
    for use in transcript.tool_uses:
        sys.stdout.write(f"{use.tool} {json.dumps(use.arguments)}\n  -> {json.dumps(use.result)}\n")
    sys.stdout.write(f"answer: {transcript.answer}\n")
