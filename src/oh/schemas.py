"""The published JSON Schemas (draft 2020-12) of every tool's arguments and result, and of the
bodies of the owner's routes, and the one parser of tool arguments.

``parse_arguments`` is the boundary: HTTP, MCP, stdio and library callers all hand it what the
agent sent, and it returns a typed value or raises a typed error. It reads numbers by the input
rule of ``oh.core.canonical`` (``5.0`` is 5), runs the checks whose messages name the exact rule
a change broke, and then validates against the published schema, so nothing the schema refuses
is ever accepted. The schemas say everything JSON Schema can say; the few rules it cannot say
(they relate two values, or measure one) are listed in ``RELATIONAL_RULES`` and in each schema's
``description``; schemathesis, in positive and negative mode, holds the schemas and the server
equal on everything else (``stress/published_schemas.py``, small in CI).
``TOOL_CONTRACT_VERSION`` changes when a shape changes incompatibly.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any, NamedTuple

import fastjsonschema

from oh.core.canonical import MAX_SAFE_INTEGER, check_json, input_value
from oh.core.changes import (
    MAX_CHANGES,
    MAX_REQUEST_ID,
    Change,
    parse_based_on,
    parse_changes,
    parse_request_id,
)
from oh.core.identifiers import IDENTIFIER_PATTERN, identifier_schema
from oh.core.records import LINK_KEYS, MAX_LINKS, MAX_TEXT, NAME_PATTERN
from oh.core.reviewed import LOCATOR_KEYS, MAX_PASSAGE, MAX_REASON
from oh.errors import InvalidArgument, TooManyChanges
from oh.query import QUESTIONS, check_question

__all__ = [
    "ARGUMENTS",
    "BODIES",
    "DEFAULT_LIMIT",
    "DEFAULT_RECALL_LIMIT",
    "IDENTIFIER",
    "MAX_LIMIT",
    "MAX_RECALL_LIMIT",
    "RELATIONAL_RULES",
    "RESULTS",
    "TOOL_CONTRACT_VERSION",
    "Arguments",
    "Explain",
    "Query",
    "Read",
    "Recall",
    "Remember",
    "integer",
    "parse_arguments",
    "validate_arguments",
    "validate_body",
]

TOOL_CONTRACT_VERSION = 1
MAX_LIMIT = 200
MAX_RECALL_LIMIT = 20
DEFAULT_LIMIT = 50
DEFAULT_RECALL_LIMIT = 10
MAX_TOKEN = 2048

_SCHEMA = "https://json-schema.org/draft/2020-12/schema"


def integer(minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> dict[str, Any]:
    """An integer schema; every integer Oh takes is bounded, at most by ±(2^53-1)."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


IDENTIFIER = identifier_schema()
NAME = {"type": "string", "pattern": NAME_PATTERN}
_WHOLE_NAME = re.compile(NAME_PATTERN).fullmatch
KIND = {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"}
DIGEST = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
ORIGIN = {"enum": ["note", "reviewed"]}
# A query token or cursor: any text here; one this host did not sign answers token_invalid.
TOKEN = {"type": "string", "maxLength": MAX_TOKEN}
# Text that must say something: at least one character that is not white space.
SAYS_SOMETHING = "\\S"
_names = {"type": "array", "items": NAME, "maxItems": MAX_LINKS, "uniqueItems": True}

# Any JSON number: an integer literal (no fraction, no exponent) outside ±(2^53-1) is refused
# when the body is read (oh.core.canonical), which a schema cannot say, since it sees values, not
# how they were written; every other finite number is a double.
JSON_NUMBER = {
    "type": "number",
    "description": (
        "A finite number. An integer written without a fraction or an exponent must lie within"
        " ±(2^53-1); any other number is an IEEE 754 double, kept by its RFC 8785 form."
    ),
}
JSON_VALUE_REF = "#/$defs/json_value"
JSON_VALUE = {
    "anyOf": [
        {"type": ["string", "boolean", "null"]},
        JSON_NUMBER,
        {"type": "array", "items": {"$ref": JSON_VALUE_REF}},
        {"type": "object", "additionalProperties": {"$ref": JSON_VALUE_REF}},
    ]
}
DEFS = {"json_value": JSON_VALUE}

# What JSON Schema cannot say, enforced by the parser and tested one by one.
RELATIONAL_RULES = (
    "a change names one record at most once per call",
    "a record's kind, when given, equals the prefix of its name",
    "a record's link lists do not name the record itself",
    "a record's fields are at most 16,384 bytes as canonical JSON",
    "a record's fields nest at most 32 levels, counted from the record",
    "a token or cursor is one this host signed, for this notebook and caller, not expired",
    "a request body nests at most 64 levels of arrays and objects",
)

RECORD = {
    "type": "object",
    "description": (
        "A record's content. kind is optional and, when given, equals the prefix of name;"
        " links never name the record itself; fields are at most 16,384 bytes as canonical JSON."
    ),
    "properties": {
        "name": NAME,
        "kind": KIND,
        "text": {"type": "string", "maxLength": MAX_TEXT},
        "fields": {"type": "object", "additionalProperties": {"$ref": JSON_VALUE_REF}},
        "depends_on": _names,
        "supports": _names,
        "contradicts": _names,
    },
    "required": ["name", "text"],
    "additionalProperties": False,
}

CHANGE = {
    "oneOf": [
        {
            "type": "object",
            "properties": {"op": {"enum": ["add", "replace"]}, "record": RECORD},
            "required": ["op", "record"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"op": {"const": "remove"}, "name": NAME},
            "required": ["op", "name"],
            "additionalProperties": False,
        },
    ]
}


def _object(properties: dict[str, Any], required: list[str], **more: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **more,
    }


_QUESTION_PARAMETERS = ("name", "kind", "since")


def _question_rules() -> list[dict[str, Any]]:
    """Per question: the parameters it needs (unless a cursor continues it) and no others."""
    rules = []
    for question, (needed, _) in QUESTIONS.items():
        then: dict[str, Any] = {
            "properties": {key: False for key in _QUESTION_PARAMETERS if key not in needed}
        }
        if needed:
            then["anyOf"] = [{"required": list(needed)}, {"required": ["cursor"]}]
        rules.append({"if": {"properties": {"question": {"const": question}}}, "then": then})
    return rules


ARGUMENTS: dict[str, dict[str, Any]] = {
    "remember": _object(
        {
            "based_on": integer(),
            "request_id": identifier_schema(MAX_REQUEST_ID),
            "changes": {
                "type": "array",
                "items": CHANGE,
                "minItems": 1,
                "maxItems": MAX_CHANGES,
            },
        },
        ["based_on", "request_id", "changes"],
        description="A change names one record at most once per call.",
        **{"$defs": DEFS},
    ),
    "query": _object(
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
    ),
    "read": _object({"name": NAME, "digest": DIGEST, "origin": ORIGIN}, ["name"]),
    "explain": _object(
        {"token": TOKEN, "row": integer()},
        ["token", "row"],
        description="token is the token of a query answer this host signed for this caller.",
    ),
    "recall": _object(
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
    ),
}

# -- the bodies of the owner's routes (HTTP) ---------------------------------------------------


def _says_something(schema: dict[str, Any]) -> dict[str, Any]:
    return {"allOf": [schema, {"pattern": SAYS_SOMETHING}]}


# Reviewed knowledge says something: a reviewed record's text holds more than white space.
REVIEWED_RECORD: dict[str, Any] = copy.deepcopy(RECORD)
REVIEWED_RECORD["properties"]["text"] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_TEXT,
    "pattern": SAYS_SOMETHING,
}
_LOCATOR_PART = {"oneOf": [integer(), _says_something(IDENTIFIER)]}
SOURCE_INPUT = _object(
    {
        "document": _says_something(IDENTIFIER),
        "passage": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PASSAGE,
            "pattern": SAYS_SOMETHING,
        },
        "locator": {
            "oneOf": [
                _says_something(IDENTIFIER),
                {
                    "type": "object",
                    "properties": dict.fromkeys(LOCATOR_KEYS, _LOCATOR_PART),
                    "minProperties": 1,
                    "additionalProperties": False,
                },
            ]
        },
    },
    ["document", "passage", "locator"],
)

BODIES: dict[str, dict[str, Any]] = {
    "open": _object(
        {
            "run": IDENTIFIER,
            "pin": {"oneOf": [integer(), {"const": "latest"}]},
            "run_kind": identifier_schema(64),
        },
        ["run"],
    ),
    "proposal": {
        "oneOf": [
            _object(
                {"notebook": IDENTIFIER, "name": NAME, "source": SOURCE_INPUT},
                ["notebook", "name", "source"],
                description="Propose a working note: the notebook and the note's name.",
            ),
            _object(
                {"record": REVIEWED_RECORD, "source": SOURCE_INPUT},
                ["record", "source"],
                description="Propose a new record.",
            ),
        ]
    },
    "decision": _object(
        {
            "decision": {"enum": ["accept", "reject"]},
            "reason": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_REASON,
                "pattern": SAYS_SOMETHING,
            },
            "record": REVIEWED_RECORD,
        },
        ["decision", "reason"],
        allOf=[
            {
                "if": {"properties": {"decision": {"const": "reject"}}},
                "then": {"properties": {"record": False}},
            }
        ],
        description="record (accept only) is the accepted record with the reviewer's edits.",
    ),
}
for _schema in BODIES.values():
    _schema["$schema"] = _SCHEMA
    _schema["$defs"] = DEFS

_nullable_int = {"type": ["integer", "null"]}
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
SOURCE = {
    "type": "object",
    "properties": {
        "document": {"type": "string"},
        "passage": {"type": "string"},
        "locator": {"type": ["string", "object"]},
    },
    "required": ["document", "passage", "locator"],
}
DECISION = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["accept", "accept_with_edits"]},
        "by": {"type": "string"},
        "at": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["decision", "by", "at", "reason"],
}

RESULTS: dict[str, dict[str, Any]] = {
    "remember": {
        "oneOf": [
            _object(
                {
                    "status": {"const": "applied"},
                    "version": {"type": "integer", "minimum": 1},
                    "written": {
                        "type": "array",
                        "items": _object(
                            {"name": NAME, "digest": {"oneOf": [DIGEST, {"type": "null"}]}},
                            ["name", "digest"],
                        ),
                    },
                },
                ["status", "version", "written"],
            ),
            _object(
                {
                    "status": {"const": "refused"},
                    "reason": {"const": "stale"},
                    "current_version": {"type": "integer", "minimum": 0},
                },
                ["status", "reason", "current_version"],
            ),
        ]
    },
    "query": _object(
        {
            "answer_id": {"type": "string"},
            "question": {"type": "string"},
            "version": {"type": "integer"},
            "revision": _nullable_int,
            "token": {"type": "string"},
            "token_expires_at": {"type": "string"},
            "rows": {"type": "array", "items": ROW},
            "next_cursor": {"type": ["string", "null"]},
        },
        [
            "answer_id",
            "question",
            "version",
            "revision",
            "token",
            "token_expires_at",
            "rows",
            "next_cursor",
        ],
    ),
    "read": _object(
        {
            "origin": ORIGIN,
            "kind": {"type": "string"},
            "name": NAME,
            "digest": DIGEST,
            "text": {"type": "string"},
            "fields": {"type": "object"},
            "depends_on": {"type": "array", "items": NAME},
            "supports": {"type": "array", "items": NAME},
            "contradicts": {"type": "array", "items": NAME},
            "author": {"type": "string"},
            "written_at": {"type": "string"},
            "version": {"type": "integer"},
            "revision": {"type": "integer"},
            "source": SOURCE,
            "decision": DECISION,
            "changed": {"type": "boolean"},
            "also_reviewed": {"const": True},
        },
        [
            "origin",
            "kind",
            "name",
            "digest",
            "text",
            "fields",
            "depends_on",
            "supports",
            "contradicts",
            "author",
            "written_at",
        ],
    ),
    "explain": _object(
        {
            "row": {"type": "integer"},
            "name": NAME,
            "origin": ORIGIN,
            "question": {"type": "string"},
            "reason": {"type": "string"},
            "path": {"type": "array", "items": {"type": "string"}},
            "version": {"type": "integer"},
            "revision": _nullable_int,
        },
        ["row", "name", "origin", "question", "reason", "path", "version", "revision"],
    ),
    "recall": _object(
        {
            "rows": {
                "type": "array",
                "items": _object(
                    {"name": NAME, "digest": DIGEST, "origin": ORIGIN, "score": {"type": "number"}},
                    ["name", "digest", "origin", "score"],
                ),
            },
            "shadow": {"type": "boolean"},
            "pending": {"type": "integer", "minimum": 0},
        },
        ["rows", "shadow"],
    ),
    "bootstrap": _object(
        {
            "rows": {
                "type": "array",
                "items": _object(
                    {"origin": ORIGIN, "kind": {"type": "string"}, "name": NAME, "digest": DIGEST},
                    ["origin", "kind", "name", "digest"],
                ),
            },
            "total": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
            "version": {"type": "integer"},
            "revision": _nullable_int,
        },
        ["rows", "total", "truncated", "version", "revision"],
    ),
    "error": _object(
        {
            "error": {
                "type": "object",
                "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                "required": ["code", "message"],
            }
        },
        ["error"],
    ),
}

for _schema in (*ARGUMENTS.values(), *RESULTS.values()):
    _schema["$schema"] = _SCHEMA


def compile_schema(schema: dict[str, Any]) -> Callable[[Any], Any]:
    """A validator of ``schema``; its ``$defs`` (the JSON value) resolve wherever it is used."""
    validator: Callable[[Any], Any] = fastjsonschema.compile({**schema, "$defs": DEFS})
    return validator


_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    tool: compile_schema(schema) for tool, schema in ARGUMENTS.items()
}
_BODY_VALIDATORS = {what: compile_schema(schema) for what, schema in BODIES.items()}


def validate_body(what: str, body: Any) -> None:
    """Check an owner request's body (``open``, ``proposal``, ``decision``) against its
    published schema; ``invalid_argument`` otherwise."""
    check_schema(_BODY_VALIDATORS[what], f"{what} body", body)


def validate_arguments(tool: str, arguments: Any) -> None:
    """Check ``arguments`` against the tool's published schema; ``invalid_argument`` (or
    ``too_many_changes``) naming the offending place otherwise."""
    check_schema(_VALIDATORS[tool], tool, arguments)


# What a pattern means, for people: "must match pattern ^[^\u0000-...]*$" says nothing to them.
_PATTERNS = {
    IDENTIFIER_PATTERN: "must hold no control, bidirectional or zero-width characters",
    SAYS_SOMETHING: "must hold more than white space",
    NAME_PATTERN: "must be a record name <kind>:<slug>",
}


def check_schema(validator: Callable[[Any], Any], what: str, value: Any) -> None:
    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        where = ".".join(str(part) for part in exc.path[1:]) or what
        said = _PATTERNS.get(exc.rule_definition) if exc.rule == "pattern" else None
        message = f"{where} {said}" if said else exc.message.replace(str(exc.name), where, 1)
        raise InvalidArgument(f"{what}: {message}", path=str(exc.name)) from None
    except (RecursionError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what}: arguments are not valid JSON values ({exc})") from None


# -- the typed arguments -------------------------------------------------------------------------
# Named tuples: immutable like frozen dataclasses, and built several times faster, which counts on
# a read that takes 25 us in all.


class Remember(NamedTuple):
    based_on: int
    request_id: str
    changes: tuple[Change, ...]


class Query(NamedTuple):
    question: str
    params: dict[str, Any]  # name, kind, since: those given
    limit: int
    cursor: str | None


class Read(NamedTuple):
    name: str
    digest: str | None
    origin: str | None


class Explain(NamedTuple):
    token: str
    row: int


class Recall(NamedTuple):
    text: str
    limit: int


Arguments = Remember | Query | Read | Explain | Recall


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


def _integer(value: Any) -> int:
    """An integer the schema accepted: an int, or a float whose value is one (``5.0``)."""
    return value if type(value) is int else int(value)


_REMEMBER_KEYS = frozenset(("based_on", "request_id", "changes"))


def _whole(arguments: dict[str, Any]) -> bool:
    """Whether a ``remember`` call whose changes the parser accepted is one the published schema
    accepts whole, decided without running it: exactly its three keys, a ``based_on`` and a
    ``request_id`` their own parsers accept as given (an int, not ``5.0``), and changes that are
    plain objects whose records hold no ``fields`` (those are read by the number rule) and only
    lists for links. The parser is stricter than the schema on everything else a change holds
    (tests/test_read_arguments.py compares the two). Anything else is checked against the
    schema, whose message then names the rule broken."""
    if arguments.keys() != _REMEMBER_KEYS:
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


def _remember(arguments: Any) -> Remember:
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
        validate_arguments("remember", arguments)
        based_on = parse_based_on(_integer(arguments["based_on"]))
        request_id = parse_request_id(arguments["request_id"])
        return Remember(based_on, request_id, parsed)
    validate_arguments("remember", arguments)
    raise AssertionError("the schema refuses what is not an object")  # pragma: no cover


def _query(arguments: Any) -> Query:
    if type(arguments) is dict and type(arguments.get("question")) is str:
        question = arguments["question"]
        needed = check_question(question)  # unknown_question, not invalid_argument
        for key in _QUESTION_PARAMETERS:
            if key in needed and key not in arguments and "cursor" not in arguments:
                raise InvalidArgument(f"question {question} needs {key!r}")
            if key not in needed and key in arguments:
                raise InvalidArgument(f"question {question} takes no {key!r}")
    validate_arguments("query", arguments)
    params = {key: arguments[key] for key in _QUESTION_PARAMETERS if key in arguments}
    if "since" in params:
        params["since"] = _integer(params["since"])
    return Query(
        arguments["question"],
        params,
        _integer(arguments.get("limit", DEFAULT_LIMIT)),
        arguments.get("cursor"),
    )


def _read(arguments: Any) -> Read:
    # The common call, ``{"name": <a record name>}``, is one the schema accepts whole: a name that
    # matches its pattern from end to end, and nothing else. Anything else is checked in full.
    if type(arguments) is dict and len(arguments) == 1:
        name = arguments.get("name")
        if type(name) is str and _WHOLE_NAME(name) is not None:
            return Read(name, None, None)
    validate_arguments("read", arguments)
    return Read(arguments["name"], arguments.get("digest"), arguments.get("origin"))


def _explain(arguments: Any) -> Explain:
    validate_arguments("explain", arguments)
    return Explain(arguments["token"], _integer(arguments["row"]))


def _recall(arguments: Any) -> Recall:
    validate_arguments("recall", arguments)
    text = arguments["text"]
    if not text.isascii():
        check_json(text, "text")  # a lone surrogate cannot be embedded
    return Recall(text, _integer(arguments.get("limit", DEFAULT_RECALL_LIMIT)))


_PARSERS: dict[str, Callable[[Any], Arguments]] = {
    "remember": _remember,
    "query": _query,
    "read": _read,
    "explain": _explain,
    "recall": _recall,
}


def parse_arguments(tool: str, arguments: Any) -> Arguments:
    """The typed arguments of one call of ``tool``, or ``invalid_argument`` (``too_many_changes``,
    ``unknown_question``) saying what is wrong. ``arguments`` is what the agent sent: parsed
    JSON from a transport, or values a library caller built, read by the same number rule
    (``5.0`` is 5; JSON Schema's "integer" is a number whose value is an integer)."""
    try:
        return _PARSERS[tool](arguments)
    except RecursionError:
        raise InvalidArgument(f"{tool}: arguments nested too deep") from None
