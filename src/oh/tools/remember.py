"""remember: write working notes, all or nothing, on the version the agent last read."""

from __future__ import annotations

from typing import Any, NamedTuple

from oh.core.canonical import input_value
from oh.core.changes import (
    MAX_CHANGES,
    MAX_REQUEST_ID,
    Change,
    parse_based_on,
    parse_changes,
    parse_request_id,
)
from oh.core.identifiers import identifier_schema
from oh.core.records import LINK_KEYS
from oh.errors import InvalidArgument, TooManyChanges
from oh.tools import reef
from oh.tools.json_schema import (
    CHANGE,
    DEFS,
    DIGEST,
    NAME,
    check_schema,
    compile_schema,
    integer,
    integer_value,
    object_of,
    published,
)
from oh.tools.spec import Caller, Example, Service, Tool

__all__ = ["TOOL", "Remember"]


class Remember(NamedTuple):
    based_on: int
    request_id: str
    changes: tuple[Change, ...]


ARGUMENTS = published(
    object_of(
        {
            "based_on": integer(),
            "request_id": identifier_schema(MAX_REQUEST_ID),
            "changes": {"type": "array", "items": CHANGE, "minItems": 1, "maxItems": MAX_CHANGES},
        },
        ["based_on", "request_id", "changes"],
        description="A change names one record at most once per call.",
        **{"$defs": DEFS},
    )
)

RESULT = published(
    {
        "oneOf": [
            object_of(
                {
                    "status": {"const": "applied"},
                    "version": {"type": "integer", "minimum": 1},
                    "written": {
                        "type": "array",
                        "items": object_of(
                            {"name": NAME, "digest": {"oneOf": [DIGEST, {"type": "null"}]}},
                            ["name", "digest"],
                        ),
                    },
                },
                ["status", "version", "written"],
            ),
            object_of(
                {
                    "status": {"const": "refused"},
                    "reason": {"const": "stale"},
                    "current_version": {"type": "integer", "minimum": 0},
                },
                ["status", "reason", "current_version"],
            ),
        ]
    }
)

_validate = compile_schema(ARGUMENTS)


def _fields_read(changes: list[Any]) -> list[Any]:
    """``changes`` with every record's ``fields`` read by the input rule (``2.0`` is 2), copied
    only where that changes something. Most notes have no fields: a lookup each."""
    read = changes
    for index, change in enumerate(changes):
        record = change.get("record") if type(change) is dict else None
        if type(record) is not dict:
            continue
        fields = record.get("fields")
        if fields:
            normal = input_value(fields, "record.fields")
            if normal is not fields:
                if read is changes:
                    read = list(changes)
                read[index] = {**change, "record": {**record, "fields": normal}}
    return read


_KEYS = frozenset(("based_on", "request_id", "changes"))


def _whole(arguments: dict[str, Any]) -> bool:
    """Whether a call whose changes the parser accepted is one the published schema accepts
    whole, decided without running it: exactly its three keys, a ``based_on`` and a
    ``request_id`` their own parsers accept as given (an int, not ``5.0``), and changes that are
    plain objects whose records hold no ``fields`` (those are read by the number rule) and only
    lists for links. The parser is stricter than the schema on everything else a change holds
    (tests/test_read_arguments.py compares the two). Anything else is checked against the
    schema, whose message then names the rule broken."""
    if arguments.keys() != _KEYS:
        return False
    try:
        parse_based_on(arguments["based_on"])
        parse_request_id(arguments["request_id"])
    except InvalidArgument:
        return False
    for change in arguments["changes"]:
        if type(change) is not dict:
            return False
        record = change.get("record")
        if record is not None:
            if type(record) is not dict or "fields" in record:
                return False
            for key in LINK_KEYS:
                if key in record and type(record[key]) is not list:
                    return False
    return True


def parse(arguments: Any) -> Remember:
    if type(arguments) is dict:
        changes = arguments.get("changes")
        if type(changes) is list:
            if len(changes) > MAX_CHANGES:
                raise TooManyChanges(
                    f"changes holds {len(changes)} operations; at most {MAX_CHANGES} per call",
                    limit=MAX_CHANGES,
                )
            changes = _fields_read(changes)
        # The parsers first: their messages name the exact rule a change broke.
        parsed = parse_changes(changes)
        if _whole(arguments):
            return Remember(arguments["based_on"], arguments["request_id"], parsed)
        check_schema(_validate, "remember", arguments)
        based_on = parse_based_on(integer_value(arguments["based_on"]))
        request_id = parse_request_id(arguments["request_id"])
        return Remember(based_on, request_id, parsed)
    check_schema(_validate, "remember", arguments)
    raise AssertionError("the schema refuses what is not an object")  # pragma: no cover


def run(tools: Service, caller: Caller, arguments: Remember) -> dict[str, Any]:
    result = tools.memory.remember(
        caller.notebook_id,
        based_on=arguments.based_on,
        request_id=arguments.request_id,
        changes=tools.profiled(caller, arguments.changes),
        author=caller.author,
        now=tools.clock(),
    )
    return result.to_json()


def _card(result: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    if result.get("status") != "applied":
        return None
    return "remembered", tuple(item["name"] for item in result["written"])


TOOL = Tool(
    name="remember",
    description=(
        "Write working notes, all or nothing: 1 to 64 changes (add, replace, remove), each name "
        "at most once. based_on is the memory version you last read; if memory has moved on the "
        'write is refused ({"status": "refused", "reason": "stale", "current_version"}): read '
        "again, then retry. request_id makes retries safe: an identical retry returns the "
        "original result and writes nothing; the same request_id with another payload is "
        "request_id_reused. The host stamps author and time."
    ),
    arguments=ARGUMENTS,
    result=RESULT,
    parse=parse,
    run=run,
    read_only=False,
    destructive=True,  # it can remove records
    idempotent=True,  # a retry with the same request_id changes nothing more
    outcome=lambda result: str(result.get("status", "ok")),
    card=_card,
    requests=(
        Example(
            "add",
            "two new notes, the second depending on the first",
            {
                "based_on": 0,
                "request_id": "r-1",
                "changes": [
                    {"op": "add", "record": reef.SURVEY},
                    {"op": "add", "record": reef.FIGURE},
                ],
            },
        ),
        Example(
            "remove",
            "remove a note",
            {
                "based_on": 1,
                "request_id": "r-2",
                "changes": [{"op": "remove", "name": "todo:check-figure-3"}],
            },
        ),
    ),
    results=(
        Example(
            "applied",
            "applied: the new version and each record's digest",
            {
                "status": "applied",
                "version": 1,
                "written": [
                    {"name": reef.SURVEY["name"], "digest": reef.SURVEY_DIGEST},
                    {"name": reef.FIGURE["name"], "digest": reef.FIGURE_DIGEST},
                ],
            },
        ),
        Example(
            "stale",
            "refused: based_on is not the current version; read again",
            {"status": "refused", "reason": "stale", "current_version": 1},
        ),
    ),
)
