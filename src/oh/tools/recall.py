"""recall: fuzzy similarity over notes, names and scores only; measured, not shown, in shadow
mode."""

from __future__ import annotations

from typing import Any, NamedTuple

from oh.core.canonical import check_json
from oh.core.records import MAX_TEXT
from oh.errors import NotFound
from oh.tools import reef
from oh.tools.json_schema import (
    DIGEST,
    NAME,
    ORIGIN,
    SAYS_SOMETHING,
    check_schema,
    compile_schema,
    integer,
    integer_value,
    object_of,
    published,
)
from oh.tools.spec import Caller, Example, Service, Tool

__all__ = ["DEFAULT_RECALL_LIMIT", "MAX_RECALL_LIMIT", "TOOL", "Recall"]

MAX_RECALL_LIMIT = 20
DEFAULT_RECALL_LIMIT = 10


class Recall(NamedTuple):
    text: str
    limit: int


ARGUMENTS = published(
    object_of(
        {
            "text": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_TEXT,
                "pattern": SAYS_SOMETHING,
            },
            "limit": integer(1, MAX_RECALL_LIMIT),
        },
        ["text"],
    )
)
RESULT = published(
    object_of(
        {
            "rows": {
                "type": "array",
                "items": object_of(
                    {"name": NAME, "digest": DIGEST, "origin": ORIGIN, "score": {"type": "number"}},
                    ["name", "digest", "origin", "score"],
                ),
            },
            "shadow": {"type": "boolean"},
            "pending": {"type": "integer", "minimum": 0},
        },
        ["rows", "shadow"],
    )
)

_validate = compile_schema(ARGUMENTS)


def parse(arguments: Any) -> Recall:
    check_schema(_validate, "recall", arguments)
    text = arguments["text"]
    if not text.isascii():
        check_json(text, "text")  # a lone surrogate cannot be embedded
    return Recall(text, integer_value(arguments.get("limit", DEFAULT_RECALL_LIMIT)))


def run(tools: Service, caller: Caller, arguments: Recall) -> dict[str, Any]:
    notebook = tools.open_notebook(caller)
    if tools.recall_service is None:
        raise NotFound("recall is not enabled on this host")
    found = tools.recall_service.recall(notebook, arguments.text, arguments.limit)
    if tools.shadow:
        # Measured, never shown: a similar note must not enter the conversation unread.
        if tools.on_recall_shadow is not None:
            tools.on_recall_shadow(caller, found)
        return {"rows": [], "shadow": True, "pending": found.get("pending", 0)}
    return {"rows": found["rows"], "shadow": False, "pending": found.get("pending", 0)}


def _card(result: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if not result.get("rows"):
        return None
    return "recalled", tuple(row["name"] for row in result["rows"])


TOOL = Tool(
    name="recall",
    description=(
        "Fuzzy similarity over notes: names, digests, origins and scores only, never text, so "
        "read a record before relying on it. In shadow mode (the host default) results are "
        "measured, not shown: rows is empty and shadow is true."
    ),
    arguments=ARGUMENTS,
    result=RESULT,
    parse=parse,
    run=run,
    needs_recall=True,
    card=_card,
    requests=(Example("", "", {"text": "coral survey methods", "limit": 5}),),
    results=(
        Example(
            "on",
            "recall on: the nearest notes and reviewed records",
            {
                "rows": [
                    {
                        "name": reef.SURVEY["name"],
                        "digest": reef.SURVEY_DIGEST,
                        "origin": "note",
                        "score": 0.4127,
                    }
                ],
                "shadow": False,
                "pending": 0,
            },
        ),
        Example(
            "shadow",
            "shadow mode: no rows; the search runs afterwards, for measurement",
            {"rows": [], "shadow": True, "pending": 0},
        ),
    ),
)
