"""Identifiers: the one rule for every string that names something (a request, a document, a
run, an owner, a notebook, a proposal, a cited document).

An identifier is 1 to ``limit`` characters of text without control characters: no C0 control
(U+0000 to U+001F), no DEL (U+007F) and no C1 control (U+0080 to U+009F). Such a character in an
identifier is never meant, prints as nothing or moves the cursor, and a NUL is cut off by
database drivers, so an identifier holding one could not be read back as it was written.

Nor the invisible format characters that make one name look like another: the bidirectional
controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), which reorder what is
displayed (``report-42\u202egpj.exe`` shows as ``report-42exe.jpg``), and the characters that
print as nothing (U+00AD, U+180E, U+200B, U+2060 to U+2064, U+FEFF). The zero-width joiner and
non-joiner (U+200C, U+200D) stay allowed: Persian, the Indic scripts and emoji sequences need them
to spell words. Everything else is allowed, spaces and any script included. Lone surrogates
cannot be UTF-8 and are refused too. ``IDENTIFIER_PATTERN`` is the same rule as a JSON Schema
pattern.
"""

from __future__ import annotations

import re
from typing import Any

from oh.errors import InvalidArgument

__all__ = [
    "CONTROL_CHARACTERS",
    "IDENTIFIER_PATTERN",
    "check_document_name",
    "check_identifier",
    "contains_control",
    "identifier_schema",
]

# One class for Python's ``re`` and for ECMA 262 regular expressions (what JSON Schema uses).
CONTROL_CHARACTERS = (
    "\\u0000-\\u001f\\u007f-\\u009f\\u00ad\\u061c\\u180e\\u200b\\u200e\\u200f\\u202a-\\u202e"
    "\\u2060-\\u2064\\u2066-\\u2069\\ufeff"
)
IDENTIFIER_PATTERN = f"^[^{CONTROL_CHARACTERS}]*$"
_CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")


def check_identifier(value: Any, where: str, limit: int = 200) -> str:
    """``value`` if it is an identifier of at most ``limit`` characters; ``invalid_argument``
    naming ``where`` otherwise."""
    if type(value) is not str or not 1 <= len(value) <= limit:
        raise InvalidArgument(f"{where} must be text of 1 to {limit} characters")
    found = _CONTROL.search(value)
    if found is not None:
        raise InvalidArgument(
            f"{where} contains the invisible character U+{ord(found.group()):04X};"
            " identifiers hold no control, bidirectional or zero-width characters"
        )
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgument(f"{where} contains a lone surrogate") from None
    return value


def check_document_name(value: Any, where: str = "document") -> str:
    """A document's name: an identifier that is also one segment of a URL path (the HTTP API
    names a document in its routes), so never ``.``, ``..`` or anything holding ``/``: a
    client resolves those against the route (``/v1/documents/..`` is ``/v1/``), so such a
    document could be registered over one transport and never reached over another."""
    check_identifier(value, where)
    if value in (".", "..") or "/" in value:
        raise InvalidArgument(
            f"{where} {value!r} is not a name: it must not be . or .. or contain /"
            " (a document is named in URL paths)"
        )
    return str(value)


def contains_control(value: str) -> bool:
    """Whether ``value`` holds a character no identifier may hold."""
    return _CONTROL.search(value) is not None


def identifier_schema(limit: int = 200) -> dict[str, Any]:
    """The JSON Schema of an identifier of at most ``limit`` characters."""
    return {"type": "string", "minLength": 1, "maxLength": limit, "pattern": IDENTIFIER_PATTERN}
