"""Packs (docs/packs.md): the one-file format that carries a profile, and the schema it defines.

A pack is a JSON object::

    {"format": 1, "name": "research", "version": "1.0.0", "description": "...",
     "kinds": {"finding": {"description": "...", "fields": {
         "statement": {"codec": "text", "required": true, "max_length": 2000}, ...}}},
     "digest": "<sha256 hex of the RFC 8785 form of every other key>"}

Reading one checks, in this order: that it is an Oh pack of a format this release reads
(``PACK_FORMAT``), that its digest matches its content (a damaged pack is refused), and that
its manifest and kinds follow the schema, with every codec known. All refusals are
``InvalidArgument`` naming the place in the pack and the rule.

A ``Schema`` is the set of kinds in force for one owner; ``Schema.check`` validates a record's
``fields`` and returns the record with every value in its codec's canonical form.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from oh.core.canonical import canonical_text, matches_digest, parse_json, sha256_hex
from oh.core.records import MAX_FIELDS_BYTES, Record
from oh.errors import IntegrityError, InvalidArgument, NotFound
from oh.profiles.codecs import Codec, Codecs, default_codecs

__all__ = [
    "MAX_PACK_BYTES",
    "PACK_FORMAT",
    "SHIPPED_PACKS",
    "Field",
    "Kind",
    "Pack",
    "Schema",
    "Version",
    "find_pack",
    "load_pack",
    "parse_pack",
    "read_pack",
    "seal",
    "shipped_pack",
    "stored_pack",
]

PACK_FORMAT = 1
MAX_PACK_BYTES = 1 << 20
MAX_KINDS = 256
MAX_FIELDS = 128
MAX_DESCRIPTION = 2000
SHIPPED_PACKS = ("research", "language", "finance")

_PACK_KEYS = frozenset(("format", "name", "version", "description", "kinds", "digest"))
_KIND_KEYS = frozenset(("description", "fields"))
_FIELD_KEYS = frozenset(("required", "description"))  # besides the codec spec
_PACK_NAME = re.compile(r"[a-z][a-z0-9_-]{0,63}")
_KIND_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
_FIELD_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)


def _refuse(where: str, rule: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{where}: {message} (rule {rule})", field=where, rule=rule)


# -- versions --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version (semver.org 2.0.0), ordered by its precedence."""

    text: str
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    @classmethod
    def parse(cls, value: Any, where: str = "version") -> Version:
        if type(value) is not str or len(value) > 64 or not _SEMVER.fullmatch(value):
            raise _refuse(
                where, "pack.version", f"{value!r:.70} is not a semantic version such as 1.2.0"
            )
        match = _SEMVER.fullmatch(value)
        assert match is not None
        major, minor, patch, pre, _ = match.groups()
        return cls(value, int(major), int(minor), int(patch), tuple(pre.split(".")) if pre else ())

    def precedence(self) -> tuple[Any, ...]:
        """Sort key: a release follows its pre-releases; numeric identifiers sort numerically
        and before alphanumeric ones; build metadata does not count."""
        pre: tuple[Any, ...] = tuple(
            (0, int(part), "") if part.isdigit() else (1, 0, part) for part in self.prerelease
        )
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, pre)

    def __lt__(self, other: Version) -> bool:
        return self.precedence() < other.precedence()

    def __str__(self) -> str:
        return self.text


# -- kinds and fields ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    codec: Codec
    required: bool = False
    description: str = ""

    def signature(self) -> dict[str, Any]:
        """What the field accepts (its description aside)."""
        return {"required": self.required, **self.codec.spec()}


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of record a profile defines: its fields, each with a codec."""

    name: str
    fields: Mapping[str, Field]
    description: str = ""

    def signature(self) -> dict[str, Any]:
        return {name: field.signature() for name, field in self.fields.items()}

    def check(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """``fields`` with every value in canonical form; ``InvalidArgument`` naming the field
        and the rule for the first that does not fit (unknown fields, then missing required
        ones, then values, each in name order)."""
        for key in sorted(fields):
            if key not in self.fields:
                known = ", ".join(sorted(self.fields)) or "none"
                raise _refuse(
                    f"fields.{key:.64}",
                    "kind.unknown_field",
                    f"a {self.name} has no field {key!r:.66} (its fields: {known})",
                )
        checked: dict[str, Any] = {}
        for name in sorted(self.fields):
            if name not in fields and self.fields[name].required:
                raise _refuse(f"fields.{name}", "kind.required", f"a {self.name} needs {name}")
        for name in sorted(fields):
            checked[name] = self.fields[name].codec.canonical(fields[name], f"fields.{name}")
        return checked


# -- packs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pack:
    """A pack read and verified: its manifest, kinds, canonical content and digest."""

    name: str
    version: Version
    description: str
    kinds: Mapping[str, Kind]
    content: str  # canonical JSON of every key but ``digest``
    digest: str  # sha256 hex of ``content``

    @property
    def format(self) -> int:
        return PACK_FORMAT

    def to_json(self) -> dict[str, Any]:
        """The pack file's object: its content plus its digest."""
        value: dict[str, Any] = parse_json(self.content, "pack")
        value["digest"] = self.digest
        return value

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": str(self.version),
            "description": self.description,
            "format": self.format,
            "digest": self.digest,
            "kinds": sorted(self.kinds),
        }


def _text(value: Any, where: str, limit: int = MAX_DESCRIPTION, *, empty: bool = False) -> str:
    if type(value) is not str or (not empty and not value.strip()) or len(value) > limit:
        what = "text" if empty else "non-empty text"
        raise _refuse(where, "pack.schema", f"must be {what} of at most {limit} characters")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _refuse(where, "pack.schema", "must be a JSON object")
    return value


def _unknown(value: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise _refuse(
            f"{where}.{unknown[0]:.64}",
            "pack.schema",
            f"is not part of the pack format (allowed: {', '.join(sorted(allowed))})",
        )


def _field(name: str, spec: Any, where: str, codecs: Codecs) -> Field:
    spec = _object(spec, where)
    required = spec.get("required", False)
    if type(required) is not bool:
        raise _refuse(f"{where}.required", "pack.schema", "must be true or false")
    description = _text(spec.get("description", ""), f"{where}.description", empty=True)
    codec_spec = {key: item for key, item in spec.items() if key not in _FIELD_KEYS}
    return Field(name, codecs.build(codec_spec, where), required, description)


def _kind(name: str, spec: Any, where: str, codecs: Codecs) -> Kind:
    spec = _object(spec, where)
    _unknown(spec, _KIND_KEYS, where)
    description = _text(spec.get("description", ""), f"{where}.description", empty=True)
    fields = _object(spec.get("fields"), f"{where}.fields")
    if len(fields) > MAX_FIELDS:
        raise _refuse(f"{where}.fields", "pack.schema", f"at most {MAX_FIELDS} fields per kind")
    parsed: dict[str, Field] = {}
    for field_name, field_spec in fields.items():
        if not _FIELD_NAME.fullmatch(field_name):
            raise _refuse(
                f"{where}.fields.{field_name:.64}",
                "pack.schema",
                "field names match [a-z][a-z0-9_]{0,63}",
            )
        parsed[field_name] = _field(field_name, field_spec, f"{where}.fields.{field_name}", codecs)
    return Kind(name, parsed, description)


def parse_pack(value: Any, *, codecs: Codecs | None = None, where: str = "pack") -> Pack:
    """Verify a pack object: format, digest, then schema (see the module docstring)."""
    if type(value) is not dict or "format" not in value:
        raise _refuse(where, "pack.format", "not an Oh pack (a JSON object with a format number)")
    if type(value["format"]) is not int or value["format"] != PACK_FORMAT:
        raise _refuse(
            f"{where}.format",
            "pack.format",
            f"pack format {value['format']!r:.20} is not one this release of Oh reads"
            f" (it reads format {PACK_FORMAT}); a newer Oh may read it",
        )
    digest = value.get("digest")
    if type(digest) is not str or not _DIGEST.fullmatch(digest):
        raise _refuse(f"{where}.digest", "pack.digest", "must be the sha256 hex of the content")
    content = {key: item for key, item in value.items() if key != "digest"}
    text = canonical_text(content, where)
    if not matches_digest(text, digest):
        raise _refuse(
            f"{where}.digest",
            "pack.digest",
            "the pack is damaged or was edited: its content does not match its digest"
            " (a pack's author reseals it after editing)",
        )
    return _schema(content, text, digest, codecs or default_codecs(), where)


def _schema(content: dict[str, Any], text: str, digest: str, codecs: Codecs, where: str) -> Pack:
    _unknown(content, _PACK_KEYS, where)
    name = content.get("name")
    if type(name) is not str or not _PACK_NAME.fullmatch(name):
        raise _refuse(f"{where}.name", "pack.schema", "pack names match [a-z][a-z0-9_-]{0,63}")
    version = Version.parse(content.get("version"), f"{where}.version")
    description = _text(content.get("description"), f"{where}.description")
    kinds = _object(content.get("kinds"), f"{where}.kinds")
    if not 1 <= len(kinds) <= MAX_KINDS:
        raise _refuse(f"{where}.kinds", "pack.schema", f"a pack defines 1 to {MAX_KINDS} kinds")
    parsed: dict[str, Kind] = {}
    for kind_name, spec in kinds.items():
        if not _KIND_NAME.fullmatch(kind_name):
            raise _refuse(
                f"{where}.kinds.{kind_name:.64}",
                "pack.schema",
                "kind names match [a-z][a-z0-9_]{0,31} (the part of a record name before ':')",
            )
        parsed[kind_name] = _kind(kind_name, spec, f"{where}.kinds.{kind_name}", codecs)
    return Pack(name, version, description, parsed, text, digest)


def load_pack(text: str | bytes, *, codecs: Codecs | None = None, where: str = "pack") -> Pack:
    """Read a pack from its file's text."""
    size = len(text.encode("utf-8")) if isinstance(text, str) else len(text)
    if size > MAX_PACK_BYTES:
        raise _refuse(where, "pack.size", f"a pack file has at most {MAX_PACK_BYTES} bytes")
    return parse_pack(parse_json(text, where), codecs=codecs, where=where)


def read_pack(path: str | Path, *, codecs: Codecs | None = None) -> Pack:
    """Read a pack file; ``not_found`` if there is none at ``path``."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PACK_BYTES + 1)
    except FileNotFoundError:
        raise NotFound(f"no pack file {path}") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read the pack file {path}: {exc.strerror}") from None
    return load_pack(data, codecs=codecs, where=path.name)


def seal(content: Mapping[str, Any], *, codecs: Codecs | None = None) -> dict[str, Any]:
    """A pack author's step: the pack object with its digest computed (any old digest is
    replaced), after checking that the result is a valid pack."""
    value = {key: item for key, item in content.items() if key != "digest"}
    value["digest"] = sha256_hex(canonical_text(value, "pack"))
    parse_pack(value, codecs=codecs)
    return value


def stored_pack(content: str, digest: str, *, codecs: Codecs | None = None) -> Pack:
    """A pack as a knowledge base stored it; damage there is an ``integrity`` error."""
    if not matches_digest(content, digest):
        raise IntegrityError(f"an installed pack does not match its digest {digest[:12]}")
    try:
        value = parse_json(content, "installed pack")
        value["digest"] = digest
        return parse_pack(value, codecs=codecs, where="installed pack")
    except InvalidArgument as exc:
        if exc.details.get("rule") == "codec.unknown":
            raise  # not damage: this process lacks a codec the pack was installed with
        raise IntegrityError(f"an installed pack is not a valid pack: {exc.message}") from exc


def shipped_pack(name: str, *, codecs: Codecs | None = None) -> Pack:
    """One of the packs that ship with Oh (``SHIPPED_PACKS``)."""
    if name not in SHIPPED_PACKS:
        raise NotFound(f"no shipped pack {name!r:.40} (shipped: {', '.join(SHIPPED_PACKS)})")
    data = resources.files("oh.profiles").joinpath("shipped", f"{name}.json").read_bytes()
    return load_pack(data, codecs=codecs, where=f"{name}.json")


def find_pack(spec: str, *, codecs: Codecs | None = None) -> Pack:
    """A pack named on a command line: a pack file's path, else a shipped pack's name."""
    if Path(spec).exists():
        return read_pack(spec, codecs=codecs)
    if spec in SHIPPED_PACKS:
        return shipped_pack(spec, codecs=codecs)
    raise NotFound(
        f"no pack file {spec} and no shipped pack of that name"
        f" (shipped: {', '.join(SHIPPED_PACKS)})"
    )


# -- the schema in force -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Schema:
    """The kinds in force for one owner: the union of the installed packs' kinds. A kind two
    packs share has the same signature in both (installing refuses anything else)."""

    kinds: Mapping[str, Kind] = dataclasses.field(default_factory=dict)
    packs: tuple[Pack, ...] = ()

    @classmethod
    def of(cls, packs: Iterable[Pack]) -> Schema:
        packs = tuple(sorted(packs, key=lambda pack: pack.name))
        kinds: dict[str, Kind] = {}
        owners: dict[str, str] = {}
        for pack in packs:
            for name, kind in pack.kinds.items():
                if name in kinds and kinds[name].signature() != kind.signature():
                    raise IntegrityError(
                        f"installed packs {owners[name]} and {pack.name} define the kind"
                        f" {name} differently"
                    )
                kinds.setdefault(name, kind)
                owners.setdefault(name, pack.name)
        return cls(kinds, packs)

    def check(self, record: Record, *, reviewed: bool = False) -> Record:
        """``record`` with its ``fields`` in canonical form when its kind belongs to an
        installed profile (unchanged otherwise). ``InvalidArgument`` names the record, the field
        and the rule. With ``reviewed``, once any profile is installed a record of a kind no
        installed profile defines is refused too (docs/packs.md: reviewed kinds come from
        profiles)."""
        kind = self.kinds.get(record.kind)
        if kind is None:
            if reviewed and self.kinds:
                raise InvalidArgument(
                    f"{record.name}: reviewed records use the kinds of the installed profiles"
                    f" ({', '.join(sorted(self.kinds))}); {record.kind} is not one of them"
                    " (rule profile.kind)",
                    field="kind",
                    rule="profile.kind",
                    name=record.name,
                )
            return record
        try:
            fields = kind.check(record.fields)
            size = len(canonical_text(fields, "fields").encode("utf-8"))
        except InvalidArgument as exc:
            raise InvalidArgument(
                f"{record.name}: {exc.message}", **{**exc.details, "name": record.name}
            ) from None
        if size > MAX_FIELDS_BYTES:
            raise InvalidArgument(
                f"{record.name}: fields are {size} bytes in canonical form; at most"
                f" {MAX_FIELDS_BYTES} (rule record.fields_size)",
                field="fields",
                rule="record.fields_size",
                name=record.name,
            )
        return dataclasses.replace(record, fields=fields)
