"""The published JSON Schemas (draft 2020-12) of every tool's arguments and result (SPEC §11).

These are the contract agents, hosts, MCP and OpenAPI see. Tool arguments are validated
against them before anything else happens; results are checked against them in the tests.
``TOOL_CONTRACT_VERSION`` changes when a shape changes incompatibly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastjsonschema

from oh.core.changes import MAX_CHANGES, MAX_REQUEST_ID
from oh.core.records import MAX_LINKS, MAX_TEXT, NAME_PATTERN
from oh.errors import InvalidArgument, TooManyChanges

__all__ = [
    "ARGUMENTS",
    "MAX_LIMIT",
    "MAX_RECALL_LIMIT",
    "RESULTS",
    "TOOL_CONTRACT_VERSION",
    "validate_arguments",
]

TOOL_CONTRACT_VERSION = 1
MAX_LIMIT = 200
MAX_RECALL_LIMIT = 20
DEFAULT_LIMIT = 50

_SCHEMA = "https://json-schema.org/draft/2020-12/schema"
NAME = {"type": "string", "pattern": NAME_PATTERN}
DIGEST = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
ORIGIN = {"enum": ["note", "reviewed"]}
_names = {"type": "array", "items": NAME, "maxItems": MAX_LINKS, "uniqueItems": True}

RECORD = {
    "type": "object",
    "properties": {
        "name": NAME,
        "kind": {"type": "string"},
        "text": {"type": "string", "maxLength": MAX_TEXT},
        "fields": {"type": "object"},
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


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


ARGUMENTS: dict[str, dict[str, Any]] = {
    "remember": _object(
        {
            "based_on": {"type": "integer", "minimum": 0},
            "request_id": {"type": "string", "minLength": 1, "maxLength": MAX_REQUEST_ID},
            "changes": {"type": "array", "items": CHANGE, "minItems": 1},
        },
        ["based_on", "request_id", "changes"],
    ),
    "query": _object(
        {
            "question": {"type": "string"},
            "name": NAME,
            "kind": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"},
            "since": {"type": "integer", "minimum": 0},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            "cursor": {"type": "string", "maxLength": 2048},
        },
        ["question"],
    ),
    "read": _object({"name": NAME, "digest": DIGEST, "origin": ORIGIN}, ["name"]),
    "explain": _object(
        {"token": {"type": "string", "maxLength": 2048}, "row": {"type": "integer", "minimum": 0}},
        ["token", "row"],
    ),
    "recall": _object(
        {
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_LIMIT},
        },
        ["text"],
    ),
}

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

_VALIDATORS: dict[str, Callable[[Any], Any]] = {
    tool: fastjsonschema.compile(schema) for tool, schema in ARGUMENTS.items()
}


def validate_arguments(tool: str, arguments: Any) -> None:
    """Check ``arguments`` against the tool's published schema; ``invalid_argument`` (or
    ``too_many_changes``) naming the offending place otherwise."""
    if tool == "remember" and isinstance(arguments, dict):
        changes = arguments.get("changes")
        if isinstance(changes, list) and len(changes) > MAX_CHANGES:
            raise TooManyChanges(
                f"changes holds {len(changes)} operations; at most {MAX_CHANGES} per call",
                limit=MAX_CHANGES,
            )
    try:
        _VALIDATORS[tool](arguments)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise InvalidArgument(f"{tool}: {exc.message}", path=str(exc.name)) from None
    except (RecursionError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"{tool}: arguments are not valid JSON values ({exc})") from None
