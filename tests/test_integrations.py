"""The agent framework integrations, end to end: for the OpenAI Agents SDK, PydanticAI and
LangGraph (through langchain-mcp-adapters), the framework's own agent loop works a notebook of a
real ``oh serve`` over MCP, with the example a user runs (``examples/integrations/``) and a
scripted model in place of a real one: no network but 127.0.0.1, no API key.

Each run remembers a lead, is refused as ``stale`` on an outdated version, reads again and
succeeds, then queries, reads and explains (``memory_task.next_move``). Each test checks the tool
results the framework handed its model, then what Oh holds afterwards, from the owner's side:
the records route and the Memory panel page.

LangGraph cannot share this virtual environment (langchain-mcp-adapters pins mcp<2, ``oh
serve`` needs mcp 2.x), so its example runs as a child process of ``.venv-langgraph/bin/python``,
which ``scripts/langgraph-venv`` makes (at once when it is there already).
"""

from __future__ import annotations

import asyncio
import functools
import html
import importlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from oh.testing.served import Served

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "integrations"
LANGGRAPH_PYTHON = ROOT / ".venv-langgraph" / "bin" / "python"
OWNER = "ada"
DOCUMENT = "reef-report.pdf"
LEAD = "lead:reef-survey-2016"
FINDING = "finding:reef-recovery"
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("integrations") / "data") as served:
        yield served


@functools.cache
def owner_token(served: Served) -> str:
    """``oh token create`` for the owner, once per server."""
    return served.owner_token(OWNER)


def example(name: str) -> ModuleType:
    """An example module, imported as ``python examples/integrations/NAME.py`` would run it."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


def check_what_the_agent_saw(transcript: dict[str, Any], run: str) -> dict[str, str]:
    """The tool calls and results of the scripted run, as the framework recorded them; the
    digests of the two notes."""
    uses = transcript["tool_uses"]
    assert [use["tool"] for use in uses] == [
        "remember", "remember", "read", "remember", "query", "read", "explain",
    ], transcript  # fmt: skip
    first, stale, reread, retry, query, read, explain = (use["result"] for use in uses)

    assert first["status"] == "applied" and first["version"] == 1
    assert [written["name"] for written in first["written"]] == [LEAD]
    lead = first["written"][0]["digest"]
    # Written on version 0 after memory moved to 1: refused, nothing written, the current
    # version named.
    assert uses[1]["arguments"]["based_on"] == 0
    assert stale == {"status": "refused", "reason": "stale", "current_version": 1}
    assert (reread["name"], reread["origin"], reread["version"]) == (LEAD, "note", 1)
    assert reread["digest"] == lead and reread["author"] == f"agent:{run}"
    # Sent again on the version the refusal named: applied.
    assert uses[3]["arguments"]["based_on"] == 1
    assert retry["status"] == "applied" and retry["version"] == 2
    assert [written["name"] for written in retry["written"]] == [FINDING]
    finding = retry["written"][0]["digest"]

    assert (query["question"], query["version"]) == ("depends_on", 2)
    assert [(row["row"], row["name"], row["digest"]) for row in query["rows"]] == [(0, LEAD, lead)]
    assert (read["name"], read["digest"], read["changed"]) == (LEAD, lead, False)
    assert explain["path"] == [FINDING, "depends_on", LEAD]
    assert (explain["question"], explain["version"], explain["name"]) == ("depends_on", 2, LEAD)
    assert FINDING in transcript["answer"] and LEAD in transcript["answer"]
    return {LEAD: lead, FINDING: finding}


def check_what_oh_holds(served: Served, notebook: str, digests: dict[str, str]) -> None:
    """From the owner's side: the records route and the Memory panel show both notes."""
    token = owner_token(served)
    with httpx.Client(base_url=served.url, timeout=30) as owner:
        answer = owner.get(
            f"/v1/notebooks/{notebook}/records", headers={"Authorization": f"Bearer {token}"}
        )
        assert answer.status_code == 200, answer.text
        notes = {note["name"]: note for note in answer.json()["notes"]}
        assert set(notes) == {LEAD, FINDING}
        assert (notes[LEAD]["version"], notes[FINDING]["version"]) == (1, 2)
        assert {name: note["digest"] for name, note in notes.items()} == digests
        assert notes[FINDING]["depends_on"] == [LEAD]

        # Sign in to the panel as a browser does: the form's CSRF value, then the token.
        form = owner.get("/panel/login")
        csrf = CSRF.search(form.text)
        assert csrf is not None, form.text
        signed_in = owner.post(
            "/panel/login", data={"csrf": csrf.group(1), "token": token, "next": ""}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = owner.get(f"/panel/notebooks/{notebook}")
    assert page.status_code == 200, page.text
    for name, version in ((LEAD, 1), (FINDING, 2)):
        # The note's card, from its anchor to the end of its article: digest, version, text.
        start = page.text.find(f'id="record-{name}"')
        assert start >= 0, (name, page.text)
        card = page.text[start : page.text.index("</article>", start)]
        assert f'title="{digests[name]}"' in card
        assert f"version {version}" in card
        assert html.escape(notes[name]["text"]) in card


def _open(served: Served, run: str) -> dict[str, Any]:
    opened = served.open_notebook(OWNER, DOCUMENT, run)
    assert opened["created"] is True and opened["notebook"]["version"] == 0
    return opened


def run_pydantic_ai(mcp_url: str, agent_token: str) -> dict[str, Any]:
    agent = example("pydantic_ai_agent")
    return asyncio.run(agent.run(mcp_url, agent_token, agent.scripted_model())).as_json()


def run_langgraph(mcp_url: str, agent_token: str) -> dict[str, Any]:
    """The example as a user runs it, in ``.venv-langgraph`` (made or brought up to date by
    ``scripts/langgraph-venv``, at once when it is there already)."""
    subprocess.run([str(ROOT / "scripts" / "langgraph-venv")], cwd=ROOT, check=True, timeout=900)
    done = subprocess.run(
        [
            str(LANGGRAPH_PYTHON), str(EXAMPLES / "langgraph_agent.py"), "--scripted", "--json",
            "--mcp-url", mcp_url, "--agent-token", agent_token,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def run_agents_sdk(mcp_url: str, agent_token: str) -> dict[str, Any]:
    agent = example("agents_sdk_agent")
    model = agent.scripted_model()
    transcript = asyncio.run(agent.run(mcp_url, agent_token, model)).as_json()
    # The SDK listed Oh's tools from the MCP endpoint and offered them to the model.
    assert {"remember", "query", "read", "explain"} <= {tool.name for tool in model.calls[0].tools}
    assert len(model.calls) == len(transcript["tool_uses"]) + 1
    return transcript


RUNS: dict[str, Callable[[str, str], dict[str, Any]]] = {
    "openai-agents": run_agents_sdk,
    "pydantic-ai": run_pydantic_ai,
    "langgraph": run_langgraph,
}


def test_an_openai_agents_sdk_agent_is_refused_as_stale_reads_again_and_succeeds(
    served: Served,
) -> None:
    opened = _open(served, "agents-sdk-1")
    transcript = run_agents_sdk(opened["mcp_url"], opened["agent_token"])
    digests = check_what_the_agent_saw(transcript, "agents-sdk-1")
    check_what_oh_holds(served, opened["notebook"]["id"], digests)


def test_a_pydantic_ai_agent_is_refused_as_stale_reads_again_and_succeeds(
    served: Served,
) -> None:
    opened = _open(served, "pydantic-ai-1")
    transcript = run_pydantic_ai(opened["mcp_url"], opened["agent_token"])
    digests = check_what_the_agent_saw(transcript, "pydantic-ai-1")
    check_what_oh_holds(served, opened["notebook"]["id"], digests)


def test_a_langgraph_agent_in_its_own_venv_is_refused_as_stale_reads_again_and_succeeds(
    served: Served,
) -> None:
    opened = _open(served, "langgraph-1")
    transcript = run_langgraph(opened["mcp_url"], opened["agent_token"])
    digests = check_what_the_agent_saw(transcript, "langgraph-1")
    check_what_oh_holds(served, opened["notebook"]["id"], digests)


@pytest.mark.parametrize("framework", list(RUNS))
def test_a_wrong_agent_token_is_an_error_the_agent_reads_and_nothing_is_written(
    served: Served, framework: str
) -> None:
    opened = _open(served, f"{framework}-wrong-token")

    transcript = RUNS[framework](opened["mcp_url"], opened["agent_token"] + "0")

    # The framework handed the model Oh's error body as the tool result, and the run went on
    # to the model's answer instead of crashing.
    [use] = transcript["tool_uses"]
    assert use["tool"] == "remember"
    assert use["result"]["error"]["code"] == "unauthenticated"
    assert "unauthenticated" in transcript["answer"]
    token = owner_token(served)
    with httpx.Client(base_url=served.url, headers={"Authorization": f"Bearer {token}"}) as owner:
        notebook = opened["notebook"]["id"]
        assert owner.get(f"/v1/notebooks/{notebook}").json()["version"] == 0
        assert owner.get(f"/v1/notebooks/{notebook}/records").json()["notes"] == []


def test_an_example_says_what_it_needs_before_it_connects(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The options every example parses, with nothing set in the environment.
    monkeypatch.delenv("OH_AGENT_TOKEN", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OH_MCP_URL", raising=False)
    parse_options = example("memory_task").parse_options

    with pytest.raises(SystemExit) as no_token:
        parse_options("example", ["--scripted"])
    assert no_token.value.code == 2
    assert "--agent-token or OH_AGENT_TOKEN" in capsys.readouterr().err
    with pytest.raises(SystemExit) as no_model:
        parse_options("example", ["--agent-token", "oha_x"])
    assert no_model.value.code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err

    monkeypatch.setenv("OH_AGENT_TOKEN", "oha_from_env")
    options = parse_options("example", ["--scripted"])
    assert (options.agent_token, options.mcp_url) == ("oha_from_env", "http://127.0.0.1:8765/mcp")
    # A model named on the command line needs no OpenAI key: its provider may be another.
    assert parse_options("example", ["--model", "anthropic:claude"]).model == "anthropic:claude"
