"""The published JSON Schemas (draft 2020-12): every tool's arguments and result, the
bootstrap's, the error body's, and the bodies of the owner's routes.

The tools' schemas are declared with each tool (``oh.tools``, one module per tool) and collected
here, so ``ARGUMENTS`` and ``RESULTS`` are what the transports enforce and publish. A tool's
parser (``parse_arguments``) is the boundary: HTTP, MCP, stdio and library callers all hand it
what the agent sent, and it returns a typed value or raises a typed error. It reads numbers by
the input rule of ``oh.core.canonical`` (``5.0`` is 5), runs the checks whose messages name the
exact rule a change broke, and then validates against the published schema, so nothing the
schema refuses is ever accepted. The schemas say everything JSON Schema can say; the few rules
it cannot say (they relate two values, or measure one) are listed in ``RELATIONAL_RULES`` and in
each schema's ``description``; schemathesis, in positive and negative mode, holds the schemas
and the server equal on everything else (``stress/published_schemas.py``, small in CI).
``TOOL_CONTRACT_VERSION`` changes when a shape changes incompatibly.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from oh.core.identifiers import identifier_schema
from oh.core.records import MAX_TEXT
from oh.core.reviewed import LOCATOR_KEYS, MAX_PASSAGE, MAX_REASON
from oh.tools import TOOLS, bootstrap, parse_arguments
from oh.tools.explain import Explain
from oh.tools.json_schema import (
    DEFS,
    DIALECT,
    IDENTIFIER,
    MAX_TOKEN,
    NAME,
    RECORD,
    SAYS_SOMETHING,
    check_schema,
    compile_schema,
    integer,
    object_of,
    published,
    says_something,
)
from oh.tools.query import DEFAULT_LIMIT, MAX_LIMIT, Query
from oh.tools.read import Read
from oh.tools.recall import DEFAULT_RECALL_LIMIT, MAX_RECALL_LIMIT, Recall
from oh.tools.remember import Remember

__all__ = [
    "ARGUMENTS",
    "BODIES",
    "DEFAULT_LIMIT",
    "DEFAULT_RECALL_LIMIT",
    "IDENTIFIER",
    "MAX_LIMIT",
    "MAX_RECALL_LIMIT",
    "MAX_TOKEN",
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

Arguments = Remember | Query | Read | Explain | Recall

ARGUMENTS: dict[str, dict[str, Any]] = {name: tool.arguments for name, tool in TOOLS.items()}

# -- the bodies of the owner's routes (HTTP) ---------------------------------------------------


# Reviewed knowledge says something: a reviewed record's text holds more than white space.
REVIEWED_RECORD: dict[str, Any] = copy.deepcopy(RECORD)
REVIEWED_RECORD["properties"]["text"] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_TEXT,
    "pattern": SAYS_SOMETHING,
}
_LOCATOR_PART = {"oneOf": [integer(), says_something(IDENTIFIER)]}
SOURCE_INPUT = object_of(
    {
        "document": says_something(IDENTIFIER),
        "passage": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_PASSAGE,
            "pattern": SAYS_SOMETHING,
        },
        "locator": {
            "oneOf": [
                says_something(IDENTIFIER),
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
    "open": object_of(
        {
            "run": IDENTIFIER,
            "pin": {"oneOf": [integer(), {"const": "latest"}]},
            "run_kind": identifier_schema(64),
        },
        ["run"],
    ),
    "proposal": {
        "oneOf": [
            object_of(
                {"notebook": IDENTIFIER, "name": NAME, "source": SOURCE_INPUT},
                ["notebook", "name", "source"],
                description="Propose a working note: the notebook and the note's name.",
            ),
            object_of(
                {"record": REVIEWED_RECORD, "source": SOURCE_INPUT},
                ["record", "source"],
                description="Propose a new record.",
            ),
        ]
    },
    "decision": object_of(
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
    _schema["$schema"] = DIALECT
    _schema["$defs"] = DEFS

RESULTS: dict[str, dict[str, Any]] = {
    **{name: tool.result for name, tool in TOOLS.items()},
    "bootstrap": bootstrap.RESULT,
    "error": published(
        object_of(
            {
                "error": {
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                    "required": ["code", "message"],
                }
            },
            ["error"],
        )
    ),
}

_BODY_VALIDATORS = {what: compile_schema(schema) for what, schema in BODIES.items()}


@functools.cache
def _validator(tool: str) -> Callable[[Any], Any]:
    # Compiled when first asked for: each tool's parser holds its own (``oh.tools``).
    return compile_schema(ARGUMENTS[tool])


def validate_body(what: str, body: Any) -> None:
    """Check an owner request's body (``open``, ``proposal``, ``decision``) against its
    published schema; ``invalid_argument`` otherwise."""
    check_schema(_BODY_VALIDATORS[what], f"{what} body", body)


def validate_arguments(tool: str, arguments: Any) -> None:
    """Check ``arguments`` against the tool's published schema alone (its parser does more);
    ``invalid_argument`` naming the offending place otherwise."""
    check_schema(_validator(tool), tool, arguments)
