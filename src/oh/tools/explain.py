"""explain: why a row of a query answer came back."""

from __future__ import annotations

from typing import Any, NamedTuple

from oh.errors import InvalidArgument
from oh.services.query import describe
from oh.tools import reef
from oh.tools.json_schema import (
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

__all__ = ["TOOL", "Explain"]


class Explain(NamedTuple):
    token: str
    row: int


ARGUMENTS = published(
    object_of(
        {"token": TOKEN, "row": integer()},
        ["token", "row"],
        description="token is the token of a query answer this host signed for this caller.",
    )
)
RESULT = published(
    object_of(
        {
            "row": {"type": "integer"},
            "name": NAME,
            "origin": ORIGIN,
            "question": {"type": "string"},
            "reason": {"type": "string"},
            "path": {"type": "array", "items": {"type": "string"}},
            "version": {"type": "integer"},
            "revision": {"type": ["integer", "null"]},
        },
        ["row", "name", "origin", "question", "reason", "path", "version", "revision"],
    )
)

_validate = compile_schema(ARGUMENTS)


def parse(arguments: Any) -> Explain:
    check_schema(_validate, "explain", arguments)
    return Explain(arguments["token"], integer_value(arguments["row"]))


def run(tools: Service, caller: Caller, arguments: Explain) -> dict[str, Any]:
    notebook = tools.open_notebook(caller)
    claims = tools.signer.verify(
        arguments.token,
        notebook_id=notebook.id,
        caller=caller.principal,
        now=tools.clock(),
        kind="explain",
    )
    index = arguments.row
    answer = tools.kept_answer(notebook.id, claims["a"], index, 1)
    if index >= answer.total:
        raise InvalidArgument(f"the answer has {answer.total} rows; no row {index}")
    row = answer.rows[index - answer.offset]
    return {
        "row": index,
        "name": row.name,
        "origin": row.origin,
        "question": answer.question,
        "reason": describe(answer.question, answer.params, row, answer.version, answer.revision),
        "path": list(row.path) or [row.name],
        "version": answer.version,
        "revision": answer.revision,
    }


TOOL = Tool(
    name="explain",
    description=(
        "Why a query row came back: the question, the reason in words, the link path, and the "
        "version and revision it was computed at. Takes the token of the query answer and the "
        "row number; the token is bound to this notebook and expires after 10 minutes."
    ),
    arguments=ARGUMENTS,
    result=RESULT,
    parse=parse,
    run=run,
    inline=True,
    requests=(Example("", "", {"token": reef.SIGNED_ANSWER, "row": 1}),),
    results=(
        Example(
            "",
            "",
            {
                "row": 1,
                "name": "todo:check-figure-3",
                "origin": "note",
                "question": "current_notes",
                "reason": "current_notes: todo:check-figure-3 is a current note at version 1",
                "path": ["todo:check-figure-3"],
                "version": 1,
                "revision": 0,
            },
        ),
    ),
)
