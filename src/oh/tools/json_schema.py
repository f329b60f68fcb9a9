"""The words every published JSON Schema (draft 2020-12) is built from, and its one checker.

A tool's schemas (``oh.tools``) and the owner routes' bodies (``oh.tools.schemas``) are made of
these: names, kinds, digests, records, changes, any JSON value. ``check_schema`` runs a
compiled schema and turns its refusal into ``invalid_argument`` naming the place and the rule,
in words a person reads ("must be a record name <kind>:<slug>", not the pattern).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import fastjsonschema

from oh.core.canonical import MAX_SAFE_INTEGER
from oh.core.identifiers import IDENTIFIER_PATTERN, identifier_schema
from oh.core.records import MAX_LINKS, MAX_TEXT, NAME_PATTERN
from oh.errors import InvalidArgument

__all__ = [
    "CHANGE",
    "DEFS",
    "DIALECT",
    "DIGEST",
    "IDENTIFIER",
    "JSON_VALUE_REF",
    "KIND",
    "MAX_TOKEN",
    "NAME",
    "ORIGIN",
    "RECORD",
    "SAYS_SOMETHING",
    "TOKEN",
    "check_schema",
    "compile_schema",
    "integer",
    "integer_value",
    "object_of",
    "published",
    "says_something",
    "whole_name",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_TOKEN = 2048


def integer(minimum: int = 0, maximum: int = MAX_SAFE_INTEGER) -> dict[str, Any]:
    """An integer schema; every integer Oh takes is bounded, at most by ±(2^53-1)."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def integer_value(value: Any) -> int:
    """An integer a schema accepted: an int, or a float whose value is one (``5.0``)."""
    return value if type(value) is int else int(value)


def published(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as it is published: naming its dialect."""
    return {**schema, "$schema": DIALECT}


def object_of(properties: dict[str, Any], required: list[str], **more: Any) -> dict[str, Any]:
    """A closed object: these properties, these required, nothing else."""
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
        **more,
    }


IDENTIFIER = identifier_schema()
NAME = {"type": "string", "pattern": NAME_PATTERN}
whole_name = re.compile(NAME_PATTERN).fullmatch
KIND = {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,31}$"}
DIGEST = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
ORIGIN = {"enum": ["note", "reviewed"]}
# A query token or cursor: any text here; one this host did not sign answers token_invalid.
TOKEN = {"type": "string", "maxLength": MAX_TOKEN}
# Text that must say something: at least one character that is not white space.
SAYS_SOMETHING = "\\S"


def says_something(schema: dict[str, Any]) -> dict[str, Any]:
    return {"allOf": [schema, {"pattern": SAYS_SOMETHING}]}


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


def compile_schema(schema: dict[str, Any]) -> Callable[[Any], Any]:
    """A validator of ``schema``; its ``$defs`` (the JSON value) resolve wherever it is used."""
    validator: Callable[[Any], Any] = fastjsonschema.compile({**schema, "$defs": DEFS})
    return validator


# What a pattern means, for people: "must match pattern ^[^\u0000-...]*$" says nothing to them.
_PATTERNS = {
    IDENTIFIER_PATTERN: "must hold no control, bidirectional or zero-width characters",
    SAYS_SOMETHING: "must hold more than white space",
    NAME_PATTERN: "must be a record name <kind>:<slug>",
}


def check_schema(validator: Callable[[Any], Any], what: str, value: Any) -> None:
    """Run ``validator`` on ``value``; ``invalid_argument`` naming the place and rule otherwise."""
    try:
        validator(value)
    except fastjsonschema.JsonSchemaValueException as exc:
        where = ".".join(str(part) for part in exc.path[1:]) or what
        said = _PATTERNS.get(exc.rule_definition) if exc.rule == "pattern" else None
        message = f"{where} {said}" if said else exc.message.replace(str(exc.name), where, 1)
        raise InvalidArgument(f"{what}: {message}", path=str(exc.name)) from None
    except (RecursionError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what}: arguments are not valid JSON values ({exc})") from None
