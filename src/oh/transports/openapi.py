"""The OpenAPI document of the HTTP API, completed, and the plain reference page ``GET /docs``.

FastAPI generates the document from the routes of ``oh.transports.http``; ``publish`` completes
it: the schemas of path and query parameters as the host checks them, the bearer schemes and
which one each route takes, a summary and description of every route (docs/http.md says the
same in full), the tags, and an example of every body, parameter and answer, taken from one run
of the reef example and each valid against its schema (tests/test_openapi.py).
``reference_page`` renders that document as one HTML page with no script and nothing loaded
from elsewhere, so ``/docs`` works on a machine with no network.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from oh._version import __version__
from oh.core.identifiers import CONTROL_CHARACTERS, identifier_schema
from oh.host import DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, NOTEBOOK_STATES
from oh.tools import TOOLS, Example, Tool, reef
from oh.tools.json_schema import DEFS, JSON_VALUE_REF, NAME, integer

__all__ = ["publish", "reference_page"]


# The schemas of path and query parameters, as the host checks them.
_PARAMETERS: dict[str, dict[str, Any]] = {
    # In a path a document id holds no "/" (a client sends it as %2F, which the server decodes
    # before routing); through the library any identifier is a document id.
    "document": {
        "type": "string",
        "minLength": 1,
        "maxLength": 200,
        "pattern": f"^[^/{CONTROL_CHARACTERS}]*$",
        "description": (
            "the host's id of a document (no control, bidirectional or zero-width characters, no /)"
        ),
    },
    "notebook_id": {**identifier_schema(), "description": "a notebook id (nb_...)"},
    "name": {**NAME, "description": "a record name, <kind>:<slug>"},
    "proposal_id": {**identifier_schema(), "description": "a proposal id (pr_...)"},
    "revision": {**integer(), "description": "a knowledge revision; the latest when left out"},
    "state": {
        "type": "string",
        "enum": list(NOTEBOOK_STATES),
        "description": "only notebooks in this state (expired: open past its forget time)",
    },
    "limit": {
        **integer(1, MAX_LIST_LIMIT),
        "description": f"at most this many in a page (default {DEFAULT_LIST_LIMIT})",
    },
    "cursor": {
        "type": "string",
        "minLength": 1,
        "maxLength": 400,
        "description": "the next_cursor of the page before",
    },
}
_SECURITY_SCHEMES = {
    "owner": {
        "type": "http",
        "scheme": "bearer",
        "description": "An owner token (oho_...), printed by `oh token create --owner NAME`.",
    },
    "agent": {
        "type": "http",
        "scheme": "bearer",
        "description": (
            "An agent token (oha_...), returned when a notebook opens; it works only for that"
            " notebook's tools."
        ),
    },
}
_SECURITY_BY_TAG = {
    "documents": "owner",
    "notebooks": "owner",
    "knowledge": "owner",
    "tools": "agent",
}
_JSON_VALUE_COMPONENT = "#/components/schemas/JsonValue"
_TAGS = {
    "documents": "The documents an owner registers; a notebook opens on one (owner token).",
    "notebooks": "Opening, listing, reading and forgetting notebooks (owner token).",
    "tools": "The agent's five tools and its bootstrap (agent token; docs/tools.md).",
    "knowledge": "Reviewed knowledge: its records, proposals and decisions (owner token).",
    "operations": "Liveness and metrics (no token).",
}

# What each route is for, as the OpenAPI document says it (docs/http.md says the same in full).
_TOOL_ROUTE = (
    "Calls the tool for the notebook the agent token names (docs/tools.md). A refused write"
    " (stale) is a result, answered 200; an error answers its code's status."
)
_ROUTE_DOCS: dict[tuple[str, str], tuple[str, str]] = {
    ("put", "/v1/documents/{document}"): (
        "Register a document",
        "Registers the document to the caller: 201 when new, 200 when it was already theirs."
        " Another owner's document is forbidden.",
    ),
    ("delete", "/v1/documents/{document}"): (
        "Remove a document",
        "Removes the document and forgets every notebook on it; later tool calls of those"
        " notebooks are forbidden.",
    ),
    ("post", "/v1/documents/{document}/notebooks"): (
        "Open a notebook",
        "Opens the run's notebook (201), or answers the one the run has open already (200),"
        " with its agent token, the MCP URL and the bootstrap. A run whose notebook was"
        " forgotten is purged (410).",
    ),
    ("get", "/v1/notebooks"): (
        "List the caller's notebooks",
        "The caller's notebooks, newest first, filtered by document and state (as it stands"
        " now), a page at a time: pass next_cursor as cursor for the next page. Never another"
        " owner's.",
    ),
    ("get", "/v1/notebooks/{notebook_id}"): (
        "Get a notebook",
        "The notebook object, its state as it stands now. Another owner's is not_found.",
    ),
    ("delete", "/v1/notebooks/{notebook_id}"): (
        "Forget a notebook now",
        "Deletes the notebook's notes, log and derived data at once and leaves a tombstone;"
        " forgetting it again is purged (410).",
    ),
    ("delete", "/v1/notebooks/{notebook_id}/records/{name}"): (
        "Forget one note",
        "Removes one working note as a logged change the owner authors (owner:<owner>): it"
        " leaves the current records and the agent's view; the log keeps its history until the"
        " notebook is forgotten. A name that is not a current note is not_found.",
    ),
    ("get", "/v1/notebooks/{notebook_id}/records"): (
        "A notebook's full records",
        "The notes, each with its digest and stamps, and the reviewed records in its view.",
    ),
    ("get", "/v1/notebooks/{notebook_id}/events"): (
        "A notebook's memory cards",
        "Server-sent events: one memory-card event each time the agent remembers or recalls.",
    ),
    ("get", "/v1/notebooks/{notebook_id}/bootstrap"): (
        "The agent's bootstrap",
        "What the agent sees when its tools load: the first rows of current_notes (at most 24"
        " or 4,000 characters), the total, the version and the pinned revision (docs/tools.md).",
    ),
    ("get", "/v1/knowledge"): (
        "Reviewed knowledge",
        "The caller's reviewed records at a revision (the latest when left out), and the latest"
        " revision number.",
    ),
    ("post", "/v1/knowledge/proposals"): (
        "Propose for review",
        "Proposes a note of one of the caller's notebooks, or a new record, for review with a"
        " cited source: 201, or 200 when the same proposal is pending already.",
    ),
    ("post", "/v1/knowledge/proposals/{proposal_id}/decision"): (
        "Decide a proposal",
        "Accepts (optionally with an edited record) or rejects a pending proposal, with a"
        " reason; accepting makes a new revision. Decided already: already_exists (409).",
    ),
    ("get", "/healthz"): (
        "Liveness",
        "Answers 200 while the server runs; needs no token, reads no database. With the purge"
        " worker that oh serve runs beside it, purge gives its period in seconds (every) and"
        " its last pass (last_pass: when, notebooks forgotten, or the error; null before the"
        " first).",
    ),
    ("get", "/metrics"): (
        "Metrics",
        "Prometheus text: tool calls by tool and outcome, time per tool, and events.",
    ),
}

# One run of the reef example as the host answered it: the examples of the OpenAPI document
# (request bodies, answers, parameters), each valid against its schema (tests/test_openapi.py).
_NB = reef.NOTEBOOK
_PROPOSAL = "pr_10f2dfdde8abece1812dd32daa72bef7"
_AGENT_TOKEN = f"oha_{_NB}.47e166f0531ff3a9aa7170e14d4be08aa2c2f0ea4ab208c13e6d555748134b21"
_OPENED_AT = "2026-03-02T09:15:04.118204Z"
_EXAMPLE_NOTEBOOK: dict[str, Any] = {
    "id": _NB,
    "state": "open",
    "started_at": _OPENED_AT,
    "forgets_at": "2026-03-03T09:15:04.118204Z",
    "version": 1,
    "pinned_revision": 0,
}
_CITED = {
    "document": "hughes-2018.pdf",
    "passage": "Recovery took at least 10 years.",
    "locator": "p. 4",
}
_REVIEWED_SURVEY = {
    **reef.note(reef.SURVEY, reef.SURVEY_DIGEST),
    "origin": "reviewed",
    "author": "ann",
    "written_at": "2026-03-02T10:02:11.530019Z",
    "revision": 1,
    "source": _CITED,
    "decision": {
        "decision": "accept",
        "by": "ann",
        "at": "2026-03-02T10:02:11.530019Z",
        "reason": "matches the cited passage",
    },
}
del _REVIEWED_SURVEY["version"]
_BOOTSTRAP = {"rows": reef.ROWS, "total": 2, "truncated": False, "version": 1, "revision": 0}


class _Named(dict[str, tuple[str, Any]]):
    """Several named examples of one body: name -> (summary, value)."""


# (method, path) -> {"request": body, status: answer}; either may be ``_Named``.
_EXAMPLES: dict[tuple[str, str], dict[str | int, Any]] = {
    ("put", "/v1/documents/{document}"): {
        201: {"document": "report-42", "owner": "ann"},
        200: {"document": "report-42", "owner": "ann"},
    },
    ("delete", "/v1/documents/{document}"): {
        200: {"document": "report-42", "forgotten_notebooks": 1},
    },
    ("post", "/v1/documents/{document}/notebooks"): {
        "request": _Named(
            run=("run-1 on the latest revision, as a chat run", {"run": "run-1"}),
            pinned=(
                "run-2 pinned to revision 1",
                {"run": "run-2", "pin": 1, "run_kind": "research"},
            ),
        ),
        201: {
            "notebook": {**_EXAMPLE_NOTEBOOK, "version": 0},
            "agent_token": _AGENT_TOKEN,
            "mcp_url": "http://127.0.0.1:8765/mcp",
            "bootstrap": {**_BOOTSTRAP, "rows": [], "total": 0, "version": 0},
        },
        200: {
            "notebook": _EXAMPLE_NOTEBOOK,
            "agent_token": _AGENT_TOKEN,
            "mcp_url": "http://127.0.0.1:8765/mcp",
            "bootstrap": _BOOTSTRAP,
        },
    },
    ("get", "/v1/notebooks"): {
        200: {
            "notebooks": [{**_EXAMPLE_NOTEBOOK, "document": "report-42", "run": "run-1"}],
            "next_cursor": None,
        },
    },
    ("get", "/v1/notebooks/{notebook_id}"): {200: _EXAMPLE_NOTEBOOK},
    ("delete", "/v1/notebooks/{notebook_id}"): {
        200: {
            "notebook": _NB,
            "purged_at": "2026-03-02T11:40:00.004512Z",
            "removed": {"note_vectors": 2, "answers": 1, "records": 2, "log": 2},
        },
    },
    ("delete", "/v1/notebooks/{notebook_id}/records/{name}"): {
        200: {"notebook": _NB, "version": 2, "removed": "todo:check-figure-3"},
    },
    ("get", "/v1/notebooks/{notebook_id}/records"): {
        200: {
            "notes": [
                reef.note(reef.SURVEY, reef.SURVEY_DIGEST),
                reef.note(reef.FIGURE, reef.FIGURE_DIGEST),
            ],
            "reviewed": [],
        },
    },
    ("get", "/v1/notebooks/{notebook_id}/bootstrap"): {200: _BOOTSTRAP},
    ("get", "/v1/knowledge"): {200: {"revision": 1, "latest": 1, "records": [_REVIEWED_SURVEY]}},
    ("post", "/v1/knowledge/proposals"): {
        "request": _Named(
            note=(
                "a note of one of the caller's notebooks",
                {"notebook": _NB, "name": "lead:reef-survey-2016", "source": _CITED},
            ),
            record=(
                "a new record",
                {
                    "record": {
                        "name": "finding:recovery-time",
                        "text": "Reef recovery took at least 10 years after the 1998 bleaching.",
                    },
                    "source": _CITED,
                },
            ),
        ),
        201: {"proposal_id": _PROPOSAL, "created": True},
        200: {"proposal_id": _PROPOSAL, "created": False},
    },
    ("post", "/v1/knowledge/proposals/{proposal_id}/decision"): {
        "request": _Named(
            accept=("accept as proposed", {"decision": "accept", "reason": "matches the passage"}),
            reject=(
                "reject",
                {"decision": "reject", "reason": "the passage is about another reef"},
            ),
        ),
        200: {
            "proposal_id": _PROPOSAL,
            "state": "accepted",
            "revision": 1,
            "name": "lead:reef-survey-2016",
            "digest": reef.SURVEY_DIGEST,
        },
    },
    ("get", "/healthz"): {
        200: {
            "status": "ok",
            "version": __version__,
            "purge": {
                "every": 60.0,
                "last_pass": {
                    "event": "purge_pass",
                    "at": "2026-12-04T09:00:00Z",
                    "purged": 0,
                    "emptied": 0,
                    "removed": {},
                    "compacted": True,
                    "every": 60.0,
                },
            },
        }
    },
}
_CARD = {
    "kind": "remembered",
    "notebook": _NB,
    "names": ["lead:reef-survey-2016"],
    "panel_url": f"http://127.0.0.1:8765/panel/notebooks/{_NB}",
    "anchors": {
        "lead:reef-survey-2016": (
            f"http://127.0.0.1:8765/panel/notebooks/{_NB}#record-lead:reef-survey-2016"
        )
    },
}
# The routes that answer text, not JSON: (media type, an example of what they send).
_TEXT_ANSWERS = {
    ("get", "/v1/notebooks/{notebook_id}/events"): (
        "text/event-stream",
        f": memory cards for {_NB}\n\n"
        f"event: memory-card\ndata: {json.dumps(_CARD)}\n\n: keep-alive\n\n",
    ),
    ("get", "/metrics"): (
        "text/plain",
        "# HELP oh_tool_calls_total Tool calls by tool and outcome.\n"
        "# TYPE oh_tool_calls_total counter\n"
        'oh_tool_calls_total{tool="remember",outcome="applied"} 12\n'
        'oh_tool_calls_total{tool="remember",outcome="refused"} 1\n'
        "# HELP oh_tool_call_seconds Time spent in tool calls.\n"
        "# TYPE oh_tool_call_seconds summary\n"
        'oh_tool_call_seconds_sum{tool="remember"} 0.084211\n'
        'oh_tool_call_seconds_count{tool="remember"} 13\n',
    ),
}
_PARAMETER_EXAMPLES = {
    "document": "report-42",
    "notebook_id": _NB,
    "name": "todo:check-figure-3",
    "proposal_id": _PROPOSAL,
    "revision": 1,
    "state": "open",
    "limit": 20,
}
# What each error status answers, in the documented shape (messages are for people).
_ERROR_EXAMPLES = {
    400: ("invalid_argument", "based_on must be an integer from 0 to 9007199254740991"),
    401: ("unauthenticated", "unknown owner token"),
    403: ("forbidden", "this agent token belongs to another notebook"),
    404: ("not_found", f"no notebook {_NB}"),
    409: ("already_exists", f"proposal {_PROPOSAL} was decided already"),
    410: ("purged", f"notebook {_NB} was forgotten"),
    415: (
        "unsupported_media_type",
        "the body must be JSON, sent as Content-Type: application/json, not 'text/plain'",
    ),
    500: ("integrity", "stored record todo:check-figure-3 does not match its digest"),
    503: ("storage_unavailable", "storage unavailable: database is locked"),
}


def _in_openapi(value: Any) -> Any:
    """A published JSON Schema as it stands inside the OpenAPI document: its reference to the JSON
    value points at the shared component, and its own ``$defs`` and ``$schema`` are dropped."""
    if isinstance(value, dict):
        return {
            key: (
                _JSON_VALUE_COMPONENT
                if key == "$ref" and item == JSON_VALUE_REF
                else _in_openapi(item)
            )
            for key, item in value.items()
            if key not in ("$defs", "$schema")
        }
    if isinstance(value, list):
        return [_in_openapi(item) for item in value]
    return value


def publish(document: dict[str, Any]) -> dict[str, Any]:
    """What FastAPI generates, completed: parameter schemas, the bearer schemes and which one each
    route takes, one JSON value component every schema shares, the tags, and an example of every
    body, parameter and answer. FastAPI's 422 goes: a request that does not fit a route is
    ``invalid_argument`` (400), and 422 is never answered."""
    document = _in_openapi(document)
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["JsonValue"] = _in_openapi(DEFS["json_value"])
    components["securitySchemes"] = _SECURITY_SCHEMES
    document["tags"] = [{"name": name, "description": text} for name, text in _TAGS.items()]
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict):
                continue
            operation.get("responses", {}).pop("422", None)
            for parameter in operation.get("parameters", []):
                name = parameter.get("name")
                if name in _PARAMETERS:
                    parameter["schema"] = dict(_PARAMETERS[name])
                if name in _PARAMETER_EXAMPLES:
                    parameter["example"] = _PARAMETER_EXAMPLES[name]
            key = (method, path)
            tool = _tool_of(method, path)
            if tool is not None:
                operation["summary"], operation["description"] = (
                    f"The {tool.name} tool",
                    _TOOL_ROUTE,
                )
            elif key in _ROUTE_DOCS:
                operation["summary"], operation["description"] = _ROUTE_DOCS[key]
            who = {_SECURITY_BY_TAG.get(tag) for tag in operation.get("tags", [])} - {None}
            operation["security"] = [{name: []} for name in sorted(who)]  # type: ignore[type-var]
            if key in _TEXT_ANSWERS:
                media_type, text = _TEXT_ANSWERS[key]
                answer = operation["responses"]["200"]
                answer["content"] = {media_type: {"schema": {"type": "string"}, "example": text}}
            _add_examples(
                operation, _EXAMPLES.get(key, {}) if tool is None else _tool_examples(tool)
            )
    return document


_TOOL_PATH = "/v1/notebooks/{notebook_id}/tools/"


def _tool_of(method: str, path: str) -> Tool[Any] | None:
    """The tool whose route this is, if it is one."""
    if method != "post" or not path.startswith(_TOOL_PATH):
        return None
    return TOOLS.get(path[len(_TOOL_PATH) :])


def _tool_examples(tool: Tool[Any]) -> dict[str | int, Any]:
    """A tool's declared examples: one unnamed example as it is, several by name."""

    def given(examples: tuple[Example, ...]) -> Any:
        if len(examples) == 1 and not examples[0].key:
            return examples[0].value
        return _Named({e.key: (e.summary, e.value) for e in examples})

    return {"request": given(tool.requests), 200: given(tool.results)}


def _add_examples(operation: dict[str, Any], examples: dict[str | int, Any]) -> None:
    """The route's own examples, then the documented error body of every error status."""
    for key, example in examples.items():
        place = operation["requestBody"] if key == "request" else operation["responses"][str(key)]
        media = place["content"]["application/json"]
        if isinstance(example, _Named):
            media["examples"] = {
                name: {"summary": summary, "value": value}
                for name, (summary, value) in example.items()
            }
        else:
            media["example"] = example
    for status, response in operation.get("responses", {}).items():
        media = response.get("content", {}).get("application/json")
        if media is not None and int(status) >= 400:
            code, message = _ERROR_EXAMPLES[int(status)]
            media["example"] = {"error": {"code": code, "message": message}}


def reference_page(document: dict[str, Any], base: str = "") -> str:
    """``GET /docs``: every operation of the OpenAPI document as one plain HTML page, with its
    token, parameters, examples and statuses. No script and nothing loaded from elsewhere;
    ``base`` is the path the app is mounted at, before its links."""
    esc = html.escape
    parts = [
        '<!doctype html><html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(document['info']['title'])}: HTTP API</title>",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<style>{_PAGE_STYLE}</style></head><body><main>",
        f"<h1>{esc(document['info']['title'])} {esc(document['info']['version'])}</h1>",
        # The description's Markdown links to this host's pages, as links.
        "<p>"
        + re.sub(
            r"\[([^\]]+)\]\((/[^)\s]*)\)",
            rf'<a href="{esc(base)}\2">\1</a>',
            esc(document["info"]["description"], quote=False),
        )
        + "</p>",
        f'<p>The same as a machine reads it: <a href="{esc(base)}/openapi.json">/openapi.json</a>'
        " (OpenAPI 3.1), with every schema. The owner's notebooks:"
        f' <a href="{esc(base)}/panel">the panel</a>.</p>',
    ]
    for tag in document.get("tags", []):
        parts.append(f"<h2>{esc(tag['name'])}</h2><p>{esc(tag['description'])}</p>")
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if tag["name"] in operation.get("tags", []):
                    parts.append(_reference_operation(method, path, operation))
    parts.append("</main></body></html>")
    return "\n".join(parts)


def _reference_operation(method: str, path: str, operation: dict[str, Any]) -> str:
    esc = html.escape
    token = " or ".join(f"{name} token" for need in operation["security"] for name in need)
    out = [
        f'<section id="{esc(operation["operationId"])}">',
        f"<h3><code>{method.upper()} {esc(path)}</code> {esc(operation['summary'])}</h3>",
        f"<p>{esc(operation['description'])}</p>",
        f"<p><b>Token:</b> {esc(token or 'none')}</p>",
    ]
    parameters = operation.get("parameters", [])
    if parameters:
        out.append("<table><tr><th>parameter</th><th>in</th><th>what it is</th></tr>")
        for p in parameters:
            about = p["schema"].get("description", "")
            shown = f"{p['name']}{'' if p.get('required') else '?'}"
            out.append(
                f"<tr><td><code>{esc(shown)}</code></td><td>{esc(p['in'])}</td>"
                f"<td>{esc(about)}</td></tr>"
            )
        out.append("</table>")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None:
        out.append("<h4>Body</h4>" + _reference_examples(body))
    out.append("<h4>Answers</h4><dl>")
    for status, response in operation["responses"].items():
        out.append(f"<dt>{esc(status)}</dt><dd>{esc(response.get('description', ''))}")
        media = response.get("content", {}).get("application/json")
        if media is not None and int(status) < 400:
            out.append(_reference_examples(media))
        out.append("</dd>")
    out.append("</dl></section>")
    return "\n".join(out)


def _reference_examples(media: dict[str, Any]) -> str:
    named = media.get("examples") or (
        {"": {"summary": "", "value": media["example"]}} if "example" in media else {}
    )
    return "".join(
        (f"<p>{html.escape(example['summary'])}:</p>" if example["summary"] else "")
        + f"<pre>{html.escape(json.dumps(example['value'], indent=2, ensure_ascii=False))}</pre>"
        for example in named.values()
    )


_PAGE_STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1b1b1b}"
    "main{max-width:60rem;margin:auto;padding:1rem 1.5rem}"
    "section{border-top:1px solid #ddd;padding-top:.5rem}"
    "pre{background:#f5f5f5;padding:.5rem;overflow-x:auto}"
    "table{border-collapse:collapse}"
    "td,th{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}"
    "dt{font-weight:bold}"
)
