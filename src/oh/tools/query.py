"""query: one question from a fixed menu, answered with names and digests, never text."""

from __future__ import annotations

from typing import Any, NamedTuple

from oh.core.clock import from_utc_text
from oh.errors import InvalidArgument
from oh.services.query import QUESTIONS, check_question
from oh.tools import reef
from oh.tools.json_schema import (
    DIGEST,
    KIND,
    NAME,
    ORIGIN,
    TOKEN,
    check_schema,
    compile_schema,
    integer,
    integer_value,
    object_of,
    published,
)
from oh.tools.spec import Caller, Example, Service, Tool

__all__ = ["DEFAULT_LIMIT", "MAX_LIMIT", "TOOL", "Query"]

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
_PARAMETERS = ("name", "kind", "since")


class Query(NamedTuple):
    question: str
    params: dict[str, Any]  # name, kind, since: those given
    limit: int
    cursor: str | None


def _question_rules() -> list[dict[str, Any]]:
    """Per question: the parameters it needs (unless a cursor continues it) and no others."""
    rules = []
    for question, (needed, _) in QUESTIONS.items():
        then: dict[str, Any] = {
            "properties": {key: False for key in _PARAMETERS if key not in needed}
        }
        if needed:
            then["anyOf"] = [{"required": list(needed)}, {"required": ["cursor"]}]
        rules.append({"if": {"properties": {"question": {"const": question}}}, "then": then})
    return rules


ARGUMENTS = published(
    object_of(
        {
            "question": {"enum": list(QUESTIONS)},
            "name": NAME,
            "kind": KIND,
            "since": integer(),
            "limit": integer(1, MAX_LIMIT),
            "cursor": TOKEN,
        },
        ["question"],
        allOf=_question_rules(),
        description=(
            "name, kind and since go with the questions that take them; a cursor continues the"
            " question it came from, with the same parameters."
        ),
    )
)

ROW = {
    "type": "object",
    "properties": {
        "row": {"type": "integer", "minimum": 0},
        "origin": ORIGIN,
        "kind": {"type": "string"},
        "name": NAME,
        "digest": {"oneOf": [DIGEST, {"type": "null"}]},
        "conflicts_with": {"type": "array", "items": NAME},
        "removed": {"const": True},
    },
    "required": ["row", "origin", "kind", "name", "digest"],
    "additionalProperties": False,
}

_ANSWER_KEYS = [
    "answer_id",
    "question",
    "version",
    "revision",
    "token",
    "token_expires_at",
    "rows",
    "next_cursor",
]
RESULT = published(
    object_of(
        {
            "answer_id": {"type": "string"},
            "question": {"type": "string"},
            "version": {"type": "integer"},
            "revision": {"type": ["integer", "null"]},
            "token": {"type": "string"},
            "token_expires_at": {"type": "string"},
            "rows": {"type": "array", "items": ROW},
            "next_cursor": {"type": ["string", "null"]},
        },
        _ANSWER_KEYS,
    )
)

_validate = compile_schema(ARGUMENTS)


def parse(arguments: Any) -> Query:
    if type(arguments) is dict and type(arguments.get("question")) is str:
        question = arguments["question"]
        needed = check_question(question)  # unknown_question, not invalid_argument
        for key in _PARAMETERS:
            if key in needed and key not in arguments and "cursor" not in arguments:
                raise InvalidArgument(f"question {question} needs {key!r}")
            if key not in needed and key in arguments:
                raise InvalidArgument(f"question {question} takes no {key!r}")
    check_schema(_validate, "query", arguments)
    params = {key: arguments[key] for key in _PARAMETERS if key in arguments}
    if "since" in params:
        params["since"] = integer_value(params["since"])
    return Query(
        arguments["question"],
        params,
        integer_value(arguments.get("limit", DEFAULT_LIMIT)),
        arguments.get("cursor"),
    )


def run(tools: Service, caller: Caller, arguments: Query) -> dict[str, Any]:
    question = arguments.question
    notebook = tools.open_notebook(caller)
    limit = arguments.limit
    now = tools.clock()
    if arguments.cursor is not None:
        claims = tools.signer.verify(
            arguments.cursor,
            notebook_id=notebook.id,
            caller=caller.principal,
            now=now,
            kind="cursor",
        )
        offset = claims["o"]
        page = tools.kept_answer(notebook.id, claims["a"], offset, limit)
        params = arguments.params
        if page.question != question or any(page.params.get(k) != v for k, v in params.items()):
            raise InvalidArgument("a cursor continues the question it came from, unchanged")
    else:  # the parser saw to it that the question has exactly its parameters
        params = arguments.params
        page = tools.answer(caller, notebook, question, params, now)
        offset = 0
    rows = page.rows[offset - page.offset : offset - page.offset + limit]
    claims = {
        "k": "explain",
        "a": page.answer_id,
        "n": notebook.id,
        "c": caller.principal,
        "e": int(from_utc_text(page.expires_at).timestamp()),
    }
    next_offset = offset + len(rows)
    next_cursor = None
    if next_offset < page.total:
        next_cursor = tools.signer.sign({**claims, "k": "cursor", "o": next_offset})
    return {
        "answer_id": page.answer_id,
        "question": page.question,
        "version": page.version,
        "revision": page.revision,
        "token": tools.signer.sign(claims),
        "token_expires_at": page.expires_at,
        "rows": [row.to_json(offset + i) for i, row in enumerate(rows)],
        "next_cursor": next_cursor,
    }


TOOL = Tool(
    name="query",
    description=(
        "Ask one question from a fixed menu: current_notes, related (name), supports (name), "
        "depends_on (name), dependents (name), conflicts, changes_since (since), of_kind (kind). "
        "Rows carry row, origin (note or reviewed), kind, name, digest and conflicts_with, never "
        "text: read a record to see it. The answer carries the memory version, the pinned "
        "revision, next_cursor for more rows, and a token for explain (valid 10 minutes)."
    ),
    arguments=ARGUMENTS,
    result=RESULT,
    parse=parse,
    run=run,
    requests=(
        Example("current", "every current note and reviewed record", {"question": "current_notes"}),
        Example(
            "depends",
            "what a record depends on",
            {"question": "depends_on", "name": "todo:check-figure-3", "limit": 20},
        ),
    ),
    results=(
        Example(
            "",
            "",
            {
                "answer_id": "an_defa04a69abdac01e91e8395bf9e0a7e",
                "question": "current_notes",
                "version": 1,
                "revision": 0,
                "token": reef.SIGNED_ANSWER,
                "token_expires_at": "2026-03-02T09:26:02.027382Z",
                "rows": [{"row": n, **row} for n, row in enumerate(reef.ROWS)],
                "next_cursor": None,
            },
        ),
    ),
)
