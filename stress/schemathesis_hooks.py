"""schemathesis hooks for Oh: what a JSON Schema cannot say, supplied to schema-valid cases.

A published schema says everything JSON Schema can say about a request; a few rules relate two
values or need the server's own signature (``oh.tools.schemas.RELATIONAL_RULES``). In positive
mode a generated case that breaks one of those is not a valid request, so the hooks mend
exactly those and nothing else:

* a record's ``kind``, when given, becomes its name's prefix; its links stop naming itself;
  the changes of one call name each record once;
* a query cursor becomes a real cursor (of ``current_notes``, the question it continues) and an
  explain token a real token, for a row that answer has; a listing's cursor becomes one a
  listing of the owner's notebooks returned;
* the agent's routes name the agent's notebook, and a decision's record keeps the proposal's
  name.

Negative cases are left alone: they must be refused as they are. Loaded by schemathesis through
``SCHEMATHESIS_HOOKS``; the server and credentials come from ``OH_FUZZ_URL``, ``OH_FUZZ_AGENT``,
``OH_FUZZ_OWNER``, ``OH_FUZZ_NOTEBOOK``, ``OH_FUZZ_PROPOSAL`` and ``OH_FUZZ_PROPOSAL_NAME``.
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import schemathesis
from schemathesis import GenerationMode

URL = os.environ.get("OH_FUZZ_URL", "")
AGENT = os.environ.get("OH_FUZZ_AGENT", "")
OWNER = os.environ.get("OH_FUZZ_OWNER", "")
NOTEBOOK = os.environ.get("OH_FUZZ_NOTEBOOK", "")
PROPOSAL = os.environ.get("OH_FUZZ_PROPOSAL", "")
PROPOSAL_NAME = os.environ.get("OH_FUZZ_PROPOSAL_NAME", "")


def _mend_record(record: Any) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("name"), str):
        return
    name = record["name"]
    if "kind" in record:
        record["kind"] = name.partition(":")[0]
    for key in ("depends_on", "supports", "contradicts"):
        if isinstance(record.get(key), list):
            record[key] = [item for item in record[key] if item != name]


def _mend_changes(body: dict[str, Any]) -> None:
    changes = body.get("changes")
    if not isinstance(changes, list):
        return
    seen: set[str] = set()
    kept = []
    for change in changes:
        if not isinstance(change, dict):
            continue
        record = change.get("record")
        _mend_record(record)
        name = record.get("name") if isinstance(record, dict) else change.get("name")
        if name in seen:
            continue
        seen.add(name)
        kept.append(change)
    body["changes"] = kept


def _query(**arguments: Any) -> dict[str, Any]:
    answer: dict[str, Any] = httpx.post(
        f"{URL}/v1/notebooks/{NOTEBOOK}/tools/query",
        json={"question": "current_notes", **arguments},
        headers={"Authorization": f"Bearer {AGENT}"},
        timeout=30,
    ).json()
    return answer


@schemathesis.hook
def map_case(context: Any, case: Any) -> Any:
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    path = case.operation.path
    if ("{notebook_id}" in path and "/tools/" in path) or path.endswith("/bootstrap"):
        case.path_parameters = {**(case.path_parameters or {}), "notebook_id": NOTEBOOK}
    if path == "/v1/notebooks" and "cursor" in (case.query or {}):
        listed = httpx.get(
            f"{URL}/v1/notebooks",
            params={"limit": 1},
            headers={"Authorization": f"Bearer {OWNER}"},
            timeout=30,
        ).json()
        case.query = {**case.query, "cursor": listed["next_cursor"]}
    body = case.body
    if not isinstance(body, dict):
        return case
    if path.endswith("/tools/remember"):
        _mend_changes(body)
    elif path.endswith("/tools/query") and "cursor" in body:
        limit = body.get("limit", 1)
        cursor = _query(limit=1).get("next_cursor")
        case.body = {"question": "current_notes", "cursor": cursor, "limit": limit}
    elif path.endswith("/tools/explain"):
        answer = _query()
        body["token"] = answer["token"]
        body["row"] = body.get("row", 0) % max(1, len(answer["rows"]))
    elif path == "/v1/knowledge/proposals":
        _mend_record(body.get("record"))
    elif path.endswith("/decision") and isinstance(body.get("record"), dict):
        if (case.path_parameters or {}).get("proposal_id") == PROPOSAL:
            body["record"]["name"] = PROPOSAL_NAME  # an edit keeps the proposed name
            _mend_record(body["record"])
        else:  # a proposal the fuzzer made: its name is not known here
            del body["record"]
    return case
