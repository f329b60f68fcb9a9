"""Records (docs/design.md): names, validation, the seven digested keys and the digest.

A record's content is exactly ``{name, kind, text, fields, depends_on, supports, contradicts}``:
all seven keys always present, link lists sorted, and ``digest`` = sha256 hex of its RFC 8785
form. Server-stamped values (author, time, version) are never part of the content.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oh.core.canonical import (
    CANONICAL_STRING,
    canonical_text,
    check_json,
    load_canonical,
    matches_digest,
    parse_json,
    sha256_hex,
)
from oh.errors import IntegrityError, InvalidArgument

__all__ = [
    "CONTENT_KEYS",
    "LINK_KEYS",
    "MAX_FIELDS_BYTES",
    "MAX_LINKS",
    "MAX_TEXT",
    "NAME_PATTERN",
    "PLAIN_RECORD",
    "Record",
    "StoredRecord",
    "check_name",
    "kind_of",
]

NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}$"
_NAME = re.compile(NAME_PATTERN)
MAX_TEXT = 4000
MAX_LINKS = 64
# The canonical form of ``fields`` may not exceed this many bytes (a note is a note, not a blob).
MAX_FIELDS_BYTES = 16384
LINK_KEYS = ("depends_on", "supports", "contradicts")
# A record's content with no ``fields``, written the one way RFC 8785 writes it: the seven keys in
# order, every string in canonical form, link lists of strings. Text that matches is canonical
# (it holds no numbers, no non-ASCII keys and nests two levels), so the common note needs no
# re-serialization to show it; anything else takes the full check.
PLAIN_RECORD = re.compile(
    (
        r'\{"contradicts":\[(?:S(?:,S)*+)?\],"depends_on":\[(?:S(?:,S)*+)?\],"fields":\{\}'
        r',"kind":S,"name":S,"supports":\[(?:S(?:,S)*+)?\],"text":S\}'
    ).replace("S", CANONICAL_STRING)
)
# digest -> (canonical content already checked to be a valid record, its parsed value when it
# holds no fields, else None). Bounded by the characters it holds, twice each content's length
# (its text and, at most, the parsed value's): 8 million characters of content. Oldest first out.
_VERIFIED: dict[str, tuple[str, dict[str, Any] | None]] = {}
_VERIFIED_CHARACTERS = 16 * 1024 * 1024
_verified_characters = 0
_VERIFYING = threading.Lock()
CONTENT_KEYS = ("name", "kind", "text", "fields", *LINK_KEYS)
# What a caller may put in a record: ``kind`` is accepted only when it equals the name's prefix,
# so a record read back can be written again unchanged.
_INPUT_KEYS = frozenset(("name", "kind", "text", "fields", *LINK_KEYS))


def check_name(name: Any, where: str = "name") -> str:
    if type(name) is not str:
        raise InvalidArgument(f"{where} must be a string")
    if _NAME.fullmatch(name) is None:
        raise InvalidArgument(
            f"{where} {name[:140]!r} does not match <kind>:<slug> ({NAME_PATTERN})"
        )
    return name


def kind_of(name: str) -> str:
    return name.partition(":")[0]


def _links(value: Any, key: str, own_name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is not list:
        raise InvalidArgument(f"record.{key} must be a list of names")
    if len(value) > MAX_LINKS:
        raise InvalidArgument(f"record.{key} has {len(value)} names; at most {MAX_LINKS}")
    names = [check_name(item, f"record.{key} entry") for item in value]
    if len(set(names)) != len(names):
        raise InvalidArgument(f"record.{key} names a record twice")
    if own_name in names:
        raise InvalidArgument(f"record.{key} may not name the record itself")
    return tuple(sorted(names))


@dataclass(frozen=True, slots=True)
class Record:
    """A record's content: the seven keys that are digested. Build with ``Record.parse``."""

    name: str
    text: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    supports: tuple[str, ...] = ()
    contradicts: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return kind_of(self.name)

    @classmethod
    def parse(cls, value: Any) -> Record:
        """Validate a caller-supplied record object and return its normalized content."""
        if type(value) is not dict and not isinstance(value, Mapping):
            raise InvalidArgument("record must be an object")
        if not _INPUT_KEYS.issuperset(value):
            unknown = set(value) - _INPUT_KEYS
            raise InvalidArgument(
                f"record has unknown keys: {', '.join(sorted(map(str, unknown)))}"
                " (author, time and version are stamped by the host)"
            )
        if "name" not in value:
            raise InvalidArgument("record.name is required")
        name = check_name(value["name"], "record.name")
        if "kind" in value and value["kind"] != kind_of(name):
            raise InvalidArgument("record.kind must equal the name's prefix")
        text = value.get("text")
        if type(text) is not str:
            raise InvalidArgument("record.text is required and must be a string")
        if len(text) > MAX_TEXT:
            raise InvalidArgument(f"record.text has {len(text)} characters; at most {MAX_TEXT}")
        if not text.isascii():  # only non-ASCII text can hold a lone surrogate
            check_json(text, "record.text")
        fields = value.get("fields")
        if fields is None:
            fields = {}
        if type(fields) is not dict:
            raise InvalidArgument("record.fields must be a JSON object")
        if fields:  # most notes have none: nothing to measure or copy
            size = len(canonical_text(fields, "record.fields").encode("utf-8"))
            if size > MAX_FIELDS_BYTES:
                raise InvalidArgument(
                    f"record.fields is {size} bytes as canonical JSON; at most {MAX_FIELDS_BYTES}"
                )
            fields = copy.deepcopy(fields)
        else:
            fields = {}
        # Most notes have no links: an absent list costs one lookup.
        depends_on = value.get("depends_on")
        supports = value.get("supports")
        contradicts = value.get("contradicts")
        return cls(
            name,
            text,
            fields,
            () if depends_on is None else _links(depends_on, "depends_on", name),
            () if supports is None else _links(supports, "supports", name),
            () if contradicts is None else _links(contradicts, "contradicts", name),
        )

    def content(self) -> dict[str, Any]:
        """The seven digested keys, exactly as ``read`` returns them."""
        return {
            "name": self.name,
            "kind": self.kind,
            "text": self.text,
            "fields": copy.deepcopy(dict(self.fields)) if self.fields else {},
            "depends_on": list(self.depends_on),
            "supports": list(self.supports),
            "contradicts": list(self.contradicts),
        }

    def canonical(self) -> str:
        return canonical_text(self.content(), "record")

    @property
    def digest(self) -> str:
        return sha256_hex(self.canonical())


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A current record as stored: its canonical content plus the server's stamps."""

    name: str
    kind: str
    content: str  # canonical JSON of the seven keys
    digest: str
    author: str
    written_at: str
    version: int

    def verified_content(self) -> dict[str, Any]:
        """The stored content, parsed, once it is shown to match its digest; damage raises
        ``integrity``.

        The first read of a digest in this process recomputes it, checks that the content is a
        valid record in canonical form and keeps the content. A later read whose content is
        those same characters is checked by comparing them (equal text has the equal digest),
        and a record without fields is answered from a copy of the value parsed then; any other
        content is verified again from the start. The record's name is checked every time.
        """
        known = _VERIFIED.get(self.digest)
        if known is None or known[0] != self.content:
            known = _verify(self.name, self.content, self.digest)
        template = known[1]
        if template is None:
            value: dict[str, Any] = load_canonical(self.content)
        else:
            value = template.copy()
            value["fields"] = {}
            for key in LINK_KEYS:
                value[key] = template[key][:]
        if value["name"] != self.name:
            raise IntegrityError(f"stored record {self.name} holds another record's content")
        return value


def _verify(name: str, content: str, digest: str) -> tuple[str, dict[str, Any] | None]:
    """Check ``content`` against ``digest`` in full and remember it (``verified_content``)."""
    global _verified_characters
    if not matches_digest(content, digest):
        raise IntegrityError(f"stored record {name} does not match its digest")
    # A note without fields is shown canonical by a pattern (it then holds no numbers and no
    # repeated key, so the plain parser reads it exactly) and valid when parsing it as a record
    # gives back the same value; any other content is parsed and written out again.
    plain = type(content) is str and PLAIN_RECORD.fullmatch(content) is not None
    try:
        parsed = json.loads(content) if plain else parse_json(content, "stored record")
        record = Record.parse(parsed)  # reads ``parsed``, keeps none of it
    except (InvalidArgument, ValueError) as exc:
        raise IntegrityError(f"stored record {name} is not a valid record") from exc
    if record.content() != parsed if plain else record.canonical() != content:
        raise IntegrityError(f"stored record {name} is not in canonical form")
    # Without fields the value holds only text and lists of names, read alike by both readers.
    known = (content, None if record.fields else parsed)
    size = 2 * len(content)  # the content and, at most, its parsed text
    with _VERIFYING:  # readers only look up, which needs no lock
        while _VERIFIED and _verified_characters + size > _VERIFIED_CHARACTERS:
            dropped = _VERIFIED.pop(next(iter(_VERIFIED)))
            _verified_characters -= 2 * len(dropped[0])
        if digest not in _VERIFIED:
            _VERIFIED[digest] = known
            _verified_characters += size
    return known
