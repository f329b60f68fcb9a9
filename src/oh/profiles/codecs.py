"""Value codecs (docs/packs.md): each validates one typed JSON value, gives it one canonical form.

A codec is built from a spec such as ``{"codec": "text", "max_length": 200}`` (a pack's field
definition). ``canonical(value, where)`` returns the value's one canonical JSON form or raises
``InvalidArgument`` whose message names the field (``where``) and the rule broken; the error's
details carry both (``field``, ``rule``), so a caller can act on them without parsing text.

Codecs live in a registry (``Codecs``). The built-ins register themselves with the same
``register`` an extension uses; ``default_codecs()`` hands out a fresh copy to extend::

    codecs = default_codecs()

    @codecs.register
    class Postcode(Codec):
        name = "postcode"
        ...

Codecs that behave alike share a base, so that the behaviour is written once: ``_Bounded``
keeps, compares and enforces the ``minimum``/``maximum`` of integer, decimal and percent;
``_Notation`` reads the strings of one form (dates, URLs, DOIs, ISBNs, ...) and words their
format and check-digit refusals; ``_Currencies`` holds the ``currencies`` of currency and money.

Pure: standard library and ``oh.core`` only, no I/O.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar, Generic, Self, TypeVar

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_text
from oh.errors import InvalidArgument

__all__ = [
    "CURRENCIES",
    "Codec",
    "Codecs",
    "Params",
    "canonical_decimal",
    "default_codecs",
    "reject",
]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def reject(where: str, rule: str, message: str) -> InvalidArgument:
    """The one error every codec raises: ``<where>: <message> (rule <rule>)``."""
    return InvalidArgument(f"{where}: {message} (rule {rule})", field=where, rule=rule)


def _null(where: str, codec: str) -> InvalidArgument:
    return reject(where, f"{codec}.type", f"null is not a {codec} value; omit the field instead")


def _string(value: Any, where: str, codec: str, expected: str) -> str:
    if value is None:
        raise _null(where, codec)
    if type(value) is not str:
        raise reject(where, f"{codec}.type", f"{_show(value)} is not {expected}")
    return value


_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_TO_LOWER = str.maketrans(_UPPER, _LOWER)
_TO_UPPER = str.maketrans(_LOWER, _UPPER)


def _ascii_lower(text: str) -> str:
    """Lowercase ASCII letters only: ``str.lower`` would also fold other scripts (and
    ``"ß".upper()`` is ``"SS"``), turning a wrong identifier into a right-looking one."""
    return text.translate(_TO_LOWER)


def _ascii_upper(text: str) -> str:
    return text.translate(_TO_UPPER)


# -- the codec base and its parameters ---------------------------------------------------------

C = TypeVar("C", bound="Codec")


class Params:
    """A codec spec's parameters, read one by one; ``finish`` refuses any left unread."""

    def __init__(self, spec: Mapping[str, Any], where: str) -> None:
        self._spec = spec
        self._read = {"codec"}
        self.where = where

    def error(self, key: str, message: str) -> InvalidArgument:
        """A parameter that does not fit: names the parameter, rule ``codec.params``."""
        return InvalidArgument(
            f"{self.where}.{key}: {message} (rule codec.params)",
            field=f"{self.where}.{key}",
            rule="codec.params",
        )

    def raw(self, key: str) -> Any:
        """The parameter as written (None when absent), marked as read."""
        self._read.add(key)
        return self._spec.get(key)

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        """A count or length: an integer of at least ``minimum``."""
        value = self.raw(key)
        if value is None:
            return default
        if type(value) is not int or not minimum <= value <= MAX_SAFE_INTEGER:
            raise self.error(key, f"must be an integer of at least {minimum}")
        return value

    def bound(self, key: str) -> int | None:
        """An optional integer bound within ±(2^53−1)."""
        value = self.raw(key)
        if value is None:
            return None
        if type(value) is not int or not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise self.error(key, "must be an integer within ±(2^53-1)")
        return value

    def decimal(self, key: str) -> str | None:
        value = self.raw(key)
        if value is None:
            return None
        return canonical_decimal(value, f"{self.where}.{key}")

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if type(value) is not bool:
            raise self.error(key, "must be true or false")
        return value

    def strings(
        self, key: str, check: Callable[[str], str | None] | None = None
    ) -> tuple[str, ...] | None:
        """A non-empty list of distinct strings, each passed through ``check`` (which returns
        the canonical string or None when it is not acceptable)."""
        value = self.raw(key)
        if value is None:
            return None
        if type(value) is not list or not value or len(value) > 1000:
            raise self.error(key, "must be a list of 1 to 1000 strings")
        items: list[str] = []
        for item in value:
            canonical = item if type(item) is str and 0 < len(item) <= 200 else None
            if canonical is not None and check is not None:
                canonical = check(canonical)
            if canonical is None:
                raise self.error(key, f"{_show(item)} is not an acceptable entry")
            items.append(canonical)
        if len(set(items)) != len(items):
            raise self.error(key, "lists an entry twice")
        return tuple(items)

    def codec(self, key: str, codecs: Codecs) -> Codec:
        value = self.raw(key)
        if value is None:
            raise self.error(key, "is required: the codec of the values")
        return codecs.build(value, f"{self.where}.{key}")

    def finish(self) -> None:
        unknown = sorted(set(self._spec) - self._read)
        if unknown:
            raise self.error(unknown[0], f"is not a parameter of the {self._spec['codec']} codec")


class Codec(ABC):
    """One kind of typed value. Subclasses set ``name`` and implement ``build``, ``canonical``
    and (when they have parameters) ``params``; an orderable codec also implements
    ``order_key`` so that intervals can hold it."""

    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def build(cls: type[C], params: Params, codecs: Codecs) -> C:
        """Read this codec's parameters from ``params`` (then ``params.finish()`` is called)."""

    @abstractmethod
    def canonical(self, value: Any, where: str) -> Any:
        """The one canonical JSON form of ``value``; ``InvalidArgument`` when it does not fit."""

    def params(self) -> dict[str, Any]:
        """The parameters with defaults filled in, as JSON."""
        return {}

    def spec(self) -> dict[str, Any]:
        return {"codec": self.name, **self.params()}

    def widens(self, old: Codec) -> bool:
        """True when every value ``old`` accepts is accepted here with the same canonical form
        (so replacing ``old`` by this codec is a compatible change)."""
        return self.spec() == old.spec()

    def order_key(self, canonical: Any) -> tuple[str, Any] | None:
        """``(dimension, key)`` ordering canonical values within one dimension (a unit, a
        currency, or ``""``); None when values of this codec have no order."""
        return None


class Codecs:
    """A registry of codecs by name."""

    def __init__(self, codecs: Iterable[type[Codec]] = ()) -> None:
        self._types: dict[str, type[Codec]] = {}
        for codec in codecs:
            self.register(codec)

    def register(self, codec: type[C]) -> type[C]:
        """Add a codec class (usable as a class decorator); a name is registered once."""
        name = getattr(codec, "name", None)
        if type(name) is not str or re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name) is None:
            raise InvalidArgument(f"codec name {name!r} must match [a-z][a-z0-9_]{{0,31}}")
        if name in self._types:
            raise InvalidArgument(f"a codec named {name} is already registered")
        self._types[name] = codec
        return codec

    def names(self) -> list[str]:
        return sorted(self._types)

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def copy(self) -> Codecs:
        return Codecs(self._types.values())

    def build(self, spec: Any, where: str) -> Codec:
        """The codec a spec such as ``{"codec": "list", "of": {"codec": "doi"}}`` describes."""
        if not isinstance(spec, Mapping):
            raise InvalidArgument(
                f"{where}: a codec spec is an object with a codec name, e.g."
                ' {"codec": "text"} (rule codec.spec)',
                field=where,
                rule="codec.spec",
            )
        name = spec.get("codec")
        codec = self._types.get(name) if type(name) is str else None
        if codec is None:
            raise InvalidArgument(
                f"{where}.codec: {_show(name)} is not a registered codec"
                f" (known: {', '.join(self.names())}) (rule codec.unknown)",
                field=f"{where}.codec",
                rule="codec.unknown",
            )
        params = Params(spec, where)
        built = codec.build(params, self)
        params.finish()
        return built


BUILTIN = Codecs()


def default_codecs() -> Codecs:
    """A fresh registry holding the built-in codecs, for a caller to extend."""
    return BUILTIN.copy()


# -- parameters shared by several codecs, and how they compare for a compatible change -----------

N = TypeVar("N", int, str)


def _in_order(params: Params, low_key: str, low: N | None, high_key: str, high: N | None) -> None:
    """Refuse a range whose low end (the parameter ``low_key``) lies above its high end."""
    if low is not None and high is not None and Decimal(low) > Decimal(high):
        raise params.error(low_key, f"must not exceed {high_key}")


def _bounds(params: Params, read: Callable[[str], N | None]) -> tuple[N | None, N | None]:
    """A number's optional ``minimum`` and ``maximum``, each read by ``read``."""
    low, high = read("minimum"), read("maximum")
    _in_order(params, "minimum", low, "maximum", high)
    return low, high


def _counts(params: Params, low_key: str, low: int, high_key: str, high: int) -> tuple[int, int]:
    """A count range such as ``min_length`` (at least 0) to ``max_length`` (at least 1)."""
    least, most = params.integer(low_key, low), params.integer(high_key, high, minimum=1)
    _in_order(params, low_key, least, high_key, most)
    return least, most


def _wider(new: tuple[Any, Any], old: tuple[Any, Any]) -> bool:
    """True when the inclusive range ``new`` (low, high; None where open) holds all of ``old``."""
    (new_low, new_high), (old_low, old_high) = new, old
    lower = new_low is None or (old_low is not None and Decimal(new_low) <= Decimal(old_low))
    higher = new_high is None or (old_high is not None and Decimal(new_high) >= Decimal(old_high))
    return lower and higher


def _superset(new: tuple[str, ...] | None, old: tuple[str, ...] | None) -> bool:
    return new is None or (old is not None and set(new) >= set(old))


def _sorted(entries: tuple[str, ...] | None) -> list[str] | None:
    return None if entries is None else sorted(entries)


def _not_allowed(where: str, rule: str, shown: str, allowed: Iterable[str]) -> InvalidArgument:
    """A value that a list of entries (``currencies``, ``units``, ...) leaves out."""
    return reject(where, rule, f"{shown} is not allowed here ({', '.join(allowed)})")


# -- text, boolean, enum -------------------------------------------------------------------------

_LINE_BREAKS = re.compile("[\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Text(Codec):
    """Text of ``min_length`` (default 1) to ``max_length`` (default 4000) code points, kept
    exactly as written; ``single_line`` refuses line breaks."""

    name: ClassVar[str] = "text"
    min_length: int = 1
    max_length: int = 4000
    single_line: bool = False

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Text:
        lengths = _counts(params, "min_length", 1, "max_length", 4000)
        return cls(*lengths, params.boolean("single_line", False))

    def params(self) -> dict[str, Any]:
        return {
            "min_length": self.min_length,
            "max_length": self.max_length,
            "single_line": self.single_line,
        }

    def widens(self, old: Codec) -> bool:
        return (
            isinstance(old, Text)
            and _wider((self.min_length, self.max_length), (old.min_length, old.max_length))
            and (old.single_line or not self.single_line)
        )

    def canonical(self, value: Any, where: str) -> Any:
        text = _string(value, where, "text", "text")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise reject(where, "text.encoding", "text contains a lone surrogate") from None
        if len(text) < self.min_length:
            raise reject(
                where, "text.min_length", f"text must have at least {self.min_length} characters"
            )
        if len(text) > self.max_length:
            raise reject(
                where,
                "text.max_length",
                f"text has {len(text)} characters; at most {self.max_length}",
            )
        if self.single_line and _LINE_BREAKS.search(text):
            raise reject(where, "text.single_line", "text must be a single line")
        return text


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Boolean(Codec):
    """``true`` or ``false``."""

    name: ClassVar[str] = "boolean"

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Boolean:
        return cls()

    def canonical(self, value: Any, where: str) -> Any:
        if value is None:
            raise _null(where, "boolean")
        if type(value) is not bool:
            raise reject(where, "boolean.type", f"{_show(value)} is not true or false")
        return value


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Enum(Codec):
    """One of ``values`` (strings, compared exactly)."""

    name: ClassVar[str] = "enum"
    values: tuple[str, ...] = ()

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Enum:
        values = params.strings("values")
        if values is None:
            raise params.error("values", "is required: the list of allowed values")
        return cls(values)

    def params(self) -> dict[str, Any]:
        return {"values": list(self.values)}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Enum) and _superset(self.values, old.values)

    def canonical(self, value: Any, where: str) -> Any:
        text = _string(value, where, "enum", "text")
        if text not in self.values:
            shown = ", ".join(self.values[:12]) + (", ..." if len(self.values) > 12 else "")
            raise reject(where, "enum.value", f"{_show(text)} is not one of: {shown}")
        return text


# -- numbers: integer, exact decimal, percent ----------------------------------------------------


def _integral(value: Any) -> int | None:
    """An int, or a float that is exactly a safe integer (JSON ``2.0`` or ``1e3``); else None."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return int(value)
    return None


_DECIMAL = re.compile(r"([+-]?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]{1,4}))?")
MAX_DECIMAL_DIGITS = 40  # significant digits
MAX_DECIMAL_SCALE = 40  # digits after the point


def canonical_decimal(value: Any, where: str, codec: str = "decimal") -> str:
    """An exact decimal's canonical text: no exponent, no leading or trailing zeros, no ``+``,
    ``0`` for zero (so ``"+01.50"``, ``"1.5"`` and ``"15e-1"`` are all ``"1.5"``)."""
    if value is None:
        raise _null(where, codec)
    number = _integral(value)
    if number is not None:
        value = str(number)
    elif type(value) is float:
        raise reject(
            where,
            f"{codec}.string",
            f"{_show(value)} is a binary float; write exact decimals as strings,"
            ' e.g. "0.25", so that no rounding can change them',
        )
    if type(value) is not str:
        raise reject(where, f"{codec}.type", f"{_show(value)} is not a decimal number")
    match = _DECIMAL.fullmatch(value)
    if match is None:
        raise reject(
            where,
            f"{codec}.format",
            f'{_show(value)} is not a decimal number such as "-12.50" or "1.2e3"',
        )
    sign, whole, fraction, exponent = match.groups()
    fraction = fraction or ""
    digits = (whole + fraction).lstrip("0")
    scale = int(exponent or 0) - len(fraction)
    if not digits:
        return "0"
    stripped = digits.rstrip("0")
    scale += len(digits) - len(stripped)
    digits = stripped
    if len(digits) + max(scale, 0) > MAX_DECIMAL_DIGITS or -scale > MAX_DECIMAL_SCALE:
        raise reject(
            where,
            f"{codec}.size",
            f"{_show(value)} is too large or too precise: at most {MAX_DECIMAL_DIGITS}"
            f" digits, {MAX_DECIMAL_SCALE} of them after the point",
        )
    if scale >= 0:
        text = digits + "0" * scale
    elif len(digits) > -scale:
        text = digits[:scale] + "." + digits[scale:]
    else:
        text = "0." + "0" * (-scale - len(digits)) + digits
    return ("-" if sign == "-" else "") + text


@dataclass(frozen=True, slots=True)
class _Bounded(Codec, Generic[N]):
    """A number with an optional inclusive ``minimum`` and ``maximum`` (ints for integers,
    canonical decimal strings for exact decimals): the bounds are kept, compared for a
    compatible change and enforced here, with the codec's name in the rule."""

    minimum: N | None = None
    maximum: N | None = None

    def params(self) -> dict[str, Any]:
        return {"minimum": self.minimum, "maximum": self.maximum}

    def widens(self, old: Codec) -> bool:
        # Only its own kind: sharing this base does not make a percent a decimal.
        return isinstance(old, type(self)) and _wider(
            (self.minimum, self.maximum), (old.minimum, old.maximum)
        )

    def within(self, number: N, where: str) -> N:
        """``number`` (in canonical form), refused below the minimum or above the maximum."""
        exact = Decimal(number)
        if self.minimum is not None and exact < Decimal(self.minimum):
            raise reject(
                where, f"{self.name}.minimum", f"{number} is below the minimum {self.minimum}"
            )
        if self.maximum is not None and exact > Decimal(self.maximum):
            raise reject(
                where, f"{self.name}.maximum", f"{number} is above the maximum {self.maximum}"
            )
        return number


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Integer(_Bounded[int]):
    """A JSON integer within ±(2^53−1) and the optional ``minimum``/``maximum``. ``2.0`` is
    the integer 2; text such as ``"2"`` is refused."""

    name: ClassVar[str] = "integer"

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Integer:
        return cls(*_bounds(params, params.bound))

    def canonical(self, value: Any, where: str) -> Any:
        if value is None:
            raise _null(where, "integer")
        whole = type(value) is int or (type(value) is float and value.is_integer())
        if not whole:
            raise reject(where, "integer.type", f"{_show(value)} is not an integer")
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise reject(where, "integer.range", "integers must lie within ±(2^53-1)")
        return self.within(int(value), where)

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        return ("", canonical)


@dataclass(frozen=True, slots=True)
class _ExactDecimal(_Bounded[str]):
    """An exact decimal within the optional bounds; its refusals carry the codec's name."""

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Self:
        return cls(*_bounds(params, params.decimal))

    def canonical(self, value: Any, where: str) -> Any:
        return self.within(canonical_decimal(value, where, self.name), where)

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        return ("", Decimal(canonical))


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Exact(_ExactDecimal):
    """An exact decimal, written as a string (``"0.25"``) or an integer; never a binary float.
    Canonical form: the shortest plain decimal string. Optional ``minimum``/``maximum``."""

    name: ClassVar[str] = "decimal"


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Percent(_ExactDecimal):
    """A percentage as an exact decimal: ``"12.5"`` (or ``"12.5%"``) is 12.5 %. Canonical
    form: the decimal string without the sign. Optional ``minimum``/``maximum``."""

    name: ClassVar[str] = "percent"

    def canonical(self, value: Any, where: str) -> Any:
        if type(value) is str and value.endswith("%"):
            value = value[:-1]
        return _ExactDecimal.canonical(self, value, where)


# -- notations: strings of one fixed form --------------------------------------------------------


class _Notation(Codec):
    """A codec whose values are strings of one form (a date, a URL, a DOI, an ISBN, ...).
    Anything but a string is refused as ``<name>.type`` ("is not ``expected``"); ``parse``
    gives a string's canonical form. The refusals notations share, a malformed string and a
    failed check digit, are worded here. Without parameters unless ``build`` reads some."""

    expected: ClassVar[str]

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Self:
        return cls()

    def canonical(self, value: Any, where: str) -> Any:
        return self.parse(_string(value, where, self.name, self.expected), where)

    @abstractmethod
    def parse(self, text: str, where: str) -> str:
        """The canonical form of ``text``; ``InvalidArgument`` when it is not of this form."""

    def malformed(self, text: str, where: str, form: str) -> InvalidArgument:
        return reject(where, f"{self.name}.format", f"{_show(text)} is not {form}")

    def unchecked(self, text: str, where: str, check: str) -> InvalidArgument:
        return reject(where, f"{self.name}.checksum", f"{_show(text)} fails the {check}")


# -- dates and times -----------------------------------------------------------------------------

_DATE = re.compile(r"([0-9]{4})(?:-([0-9]{2})(?:-([0-9]{2}))?)?")


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Date(_Notation):
    """An ISO 8601 calendar date ``YYYY-MM-DD`` (years 0001-9999). With ``partial`` also a
    year ``YYYY`` or a month ``YYYY-MM``, which order as their first day."""

    name: ClassVar[str] = "date"
    expected: ClassVar[str] = "a date"
    partial: bool = False

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Date:
        return cls(params.boolean("partial", False))

    def params(self) -> dict[str, Any]:
        return {"partial": self.partial}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Date) and (self.partial or not old.partial)

    def parse(self, text: str, where: str) -> str:
        match = _DATE.fullmatch(text)
        if match is None:
            form = "YYYY, YYYY-MM or YYYY-MM-DD" if self.partial else "YYYY-MM-DD"
            raise self.malformed(text, where, f"a date ({form})")
        year, month, day = match.groups()
        if day is None and not self.partial:
            raise reject(where, "date.partial", f"{_show(text)} is not a full date (YYYY-MM-DD)")
        try:
            date(int(year), int(month or 1), int(day or 1))
        except ValueError:
            raise reject(where, "date.calendar", f"{text} is not a day of the calendar") from None
        return text

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        year, month, day = _DATE.fullmatch(canonical).groups()  # type: ignore[union-attr]
        return ("", (int(year), int(month or 1), int(day or 1)))


_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class DateTime(_Notation):
    """An RFC 3339 date-time with an offset, normalized to UTC: ``2024-03-01T10:00:00+02:00``
    is ``2024-03-01T08:00:00Z``. Fractions keep up to 9 digits, trailing zeros dropped."""

    name: ClassVar[str] = "datetime"
    expected: ClassVar[str] = "a date-time"

    def parse(self, text: str, where: str) -> str:
        match = _DATETIME.fullmatch(text)
        if match is None:
            raise self.malformed(
                text, where, "an RFC 3339 date-time with an offset (e.g. 2024-03-01T10:00:00Z)"
            )
        year, month, day, hour, minute, second, fraction, offset = match.groups()
        if second == "60":
            raise reject(where, "datetime.leap_second", "leap seconds (:60) are not accepted")
        try:
            moment = datetime(
                int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
            )
        except ValueError:
            raise reject(
                where, "datetime.calendar", f"{_show(text)} is not a time of the calendar"
            ) from None
        if offset not in ("Z", "z"):
            hours, minutes = int(offset[1:3]), int(offset[4:6])
            if hours > 23 or minutes > 59:
                raise reject(where, "datetime.offset", f"{offset} is not a UTC offset")
            shift = timedelta(hours=hours, minutes=minutes)
            try:
                moment = moment - shift if offset[0] == "+" else moment + shift
            except OverflowError:
                raise reject(
                    where, "datetime.range", f"{text} lies outside the years 0001-9999 in UTC"
                ) from None
        fraction = (fraction or "").rstrip("0")
        whole = moment.replace(tzinfo=None).isoformat(timespec="seconds")
        return whole + ("." + fraction if fraction else "") + "Z"

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        whole, _, fraction = canonical[:-1].partition(".")
        return ("", (whole, fraction.ljust(9, "0")))


# -- identifiers: URL, DOI, ISBN, ORCID, ISIN, LEI, ticker ---------------------------------------

_URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_URI = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://([^/?#]*)([^?#]*)(?:\?([^#]*))?(?:#(.*))?", re.S)
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_HOST_LABEL = re.compile(r"[a-z0-9](?:[a-z0-9\-]{0,61}[a-z0-9])?")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ftp": 21, "ws": 80, "wss": 443}
MAX_URL = 2048


def _percent_normalized(part: str) -> str:
    """Decode percent-encoded unreserved characters; write every other escape in uppercase."""

    def one(match: re.Match[str]) -> str:
        char = chr(int(match.group(1), 16))
        return char if char in _UNRESERVED else "%" + match.group(1).upper()

    return _PERCENT.sub(one, part)


def _without_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, for an absolute path."""
    output: list[str] = []
    segments = path.split("/")[1:]
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "..":
            if output:
                output.pop()
            if last:
                output.append("")
        elif segment == ".":
            if last:
                output.append("")
        else:
            output.append(segment)
    return "/" + "/".join(output)


def _host(host: str, where: str) -> str:
    if host.startswith("[") and host.endswith("]"):
        try:
            return "[" + ipaddress.IPv6Address(host[1:-1]).compressed + "]"
        except ValueError:
            raise reject(where, "url.host", f"{_show(host)} is not an IPv6 address") from None
    host = _ascii_lower(host)
    labels = host.removesuffix(".").split(".")
    if not host or len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise reject(
            where,
            "url.host",
            f"{_show(host)} is not a host name (letters, digits and hyphens; non-ASCII names"
            " in their xn-- form) or an IP address",
        )
    return host


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Url(_Notation):
    """An absolute URL with a host, scheme among ``schemes`` (default http, https), at most
    2,048 ASCII characters (non-ASCII percent-encoded), no user name or password.
    Canonical form (RFC 3986 §6.2.2): scheme and host in lowercase, the default port dropped,
    unreserved escapes decoded and the others in uppercase, dot segments removed, ``/`` for an
    empty path."""

    name: ClassVar[str] = "url"
    expected: ClassVar[str] = "a URL"
    schemes: tuple[str, ...] = ("http", "https")

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Url:
        def scheme(text: str) -> str | None:
            lowered = text.lower()
            return lowered if re.fullmatch(r"[a-z][a-z0-9+.\-]{0,31}", lowered) else None

        return cls(params.strings("schemes", scheme) or ("http", "https"))

    def params(self) -> dict[str, Any]:
        return {"schemes": sorted(self.schemes)}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Url) and _superset(self.schemes, old.schemes)

    def parse(self, text: str, where: str) -> str:
        if len(text) > MAX_URL:
            raise reject(where, "url.length", f"a URL has at most {MAX_URL} characters")
        if _URL_CHARACTERS.fullmatch(text) is None or _BAD_PERCENT.search(text):
            raise reject(
                where,
                "url.characters",
                f"{_show(text)} has characters a URL cannot hold (spaces, non-ASCII or a"
                " stray %); percent-encode them",
            )
        match = _URI.fullmatch(text)
        if match is None:
            raise self.malformed(text, where, "an absolute URL (scheme://host/...)")
        scheme, authority, path, query, fragment = match.groups()
        scheme = scheme.lower()
        if scheme not in self.schemes:
            raise _not_allowed(where, "url.scheme", f"the scheme {scheme}", sorted(self.schemes))
        if "@" in authority:
            raise reject(where, "url.userinfo", "URLs with a user name or password are refused")
        host, port = authority, ""
        port_match = re.fullmatch(r"(.*?):([0-9]*)", authority)
        if port_match is not None and not authority.endswith("]"):
            host, port = port_match.groups()
        host = _host(host, where)
        if port:
            number = int(port) if len(port) <= 5 else 0
            if not 1 <= number <= 65535:
                raise reject(where, "url.port", f"{port} is not a port number (1-65535)")
            port = "" if _DEFAULT_PORTS.get(scheme) == number else f":{number}"
        # After an authority the path is empty or starts with "/" (RFC 3986 path-abempty).
        path = _without_dot_segments(_percent_normalized(path)) if path else "/"
        result = f"{scheme}://{host}{port}{path}"
        if query is not None:
            result += "?" + _percent_normalized(query)
        if fragment is not None:
            result += "#" + _percent_normalized(fragment)
        return result


_DOI = re.compile(r"10\.[0-9]{4,9}(?:\.[0-9]+)*/[^\s\x00-\x1f\x7f-\x9f]+")
_DOI_RESOLVERS = (
    "https://doi.org/",
    "http://doi.org/",
    "https://dx.doi.org/",
    "http://dx.doi.org/",
)


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Doi(_Notation):
    """A DOI ``10.<registrant>/<suffix>``, also written ``doi:...`` or as a doi.org URL.
    DOIs ignore ASCII case, so the canonical form is the bare DOI in lowercase."""

    name: ClassVar[str] = "doi"
    expected: ClassVar[str] = "a DOI"

    def parse(self, text: str, where: str) -> str:
        lowered = _ascii_lower(text)
        doi = text
        for resolver in _DOI_RESOLVERS:
            if lowered.startswith(resolver):
                try:
                    doi = urllib.parse.unquote(text[len(resolver) :], errors="strict")
                except UnicodeDecodeError:
                    raise reject(where, "doi.format", "the DOI URL is not valid UTF-8") from None
                break
        else:
            if lowered.startswith("doi:"):
                doi = text[4:]
        doi = _ascii_lower(doi)
        if len(doi) > 512 or _DOI.fullmatch(doi) is None:
            raise self.malformed(
                text, where, "a DOI (10.<registrant>/<suffix>, e.g. 10.1038/nature21707)"
            )
        return doi


_ISBN_PREFIX = re.compile(r"(?i:isbn(?:-1[03])?:?\s*)")


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Isbn(_Notation):
    """An ISBN-10 or ISBN-13 (hyphens, spaces and an ``ISBN`` prefix allowed) with a valid
    check digit. Canonical form: the 13 digits, so an ISBN-10 and its ISBN-13 are equal."""

    name: ClassVar[str] = "isbn"
    expected: ClassVar[str] = "an ISBN"

    def parse(self, text: str, where: str) -> str:
        prefix = _ISBN_PREFIX.match(text)
        compact = text[prefix.end() if prefix else 0 :].replace("-", "").replace(" ", "")
        compact = _ascii_upper(compact)
        if re.fullmatch(r"[0-9]{9}[0-9X]", compact):
            total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(compact))
            if total % 11:
                raise self.unchecked(text, where, "ISBN-10 check digit")
            body = "978" + compact[:9]
            return body + _isbn13_check(body)
        if re.fullmatch(r"97[89][0-9]{10}", compact):
            if _isbn13_check(compact[:12]) != compact[12]:
                raise self.unchecked(text, where, "ISBN-13 check digit")
            return compact
        raise self.malformed(text, where, "an ISBN-10 or ISBN-13")


def _isbn13_check(body: str) -> str:
    total = sum((3 if i % 2 else 1) * int(c) for i, c in enumerate(body))
    return str((10 - total % 10) % 10)


_ORCID_PREFIX = re.compile(r"(?i:(?:https?://)?orcid\.org/)")


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Orcid(_Notation):
    """An ORCID iD (``0000-0002-1825-0097``, or its orcid.org URL) with a valid ISO 7064
    MOD 11-2 check character. Canonical form: the bare, hyphenated iD."""

    name: ClassVar[str] = "orcid"
    expected: ClassVar[str] = "an ORCID iD"

    def parse(self, text: str, where: str) -> str:
        prefix = _ORCID_PREFIX.match(text)
        compact = text[prefix.end() if prefix else 0 :]
        match = re.fullmatch(r"([0-9]{4})-?([0-9]{4})-?([0-9]{4})-?([0-9]{3}[0-9Xx])", compact)
        if match is None:
            raise self.malformed(text, where, "an ORCID iD (0000-0002-1825-0097)")
        digits = _ascii_upper("".join(match.groups()))
        total = 0
        for char in digits[:15]:
            total = (total + int(char)) * 2
        check = (12 - total % 11) % 11
        if digits[15] != ("X" if check == 10 else str(check)):
            raise self.unchecked(text, where, "ORCID check character")
        return "-".join(digits[i : i + 4] for i in range(0, 16, 4))


def _alphanumeric_digits(text: str) -> str:
    """Letters as numbers (A=10 ... Z=35), as ISIN and LEI check digits use them."""
    return "".join(str(int(char, 36)) for char in text)


class _Code(_Notation):
    """A code canonical in ASCII uppercase: the uppercased string must match ``pattern`` (else
    it is not ``form``) and pass ``valid``, its check digits, named ``check`` when it fails."""

    pattern: ClassVar[re.Pattern[str]]
    form: ClassVar[str]
    check: ClassVar[str] = ""

    def parse(self, text: str, where: str) -> str:
        code = _ascii_upper(text)
        if self.pattern.fullmatch(code) is None:
            raise self.malformed(text, where, self.form)
        if not self.valid(code):
            raise self.unchecked(text, where, self.check)
        return code

    def valid(self, code: str) -> bool:
        """Whether a well-formed code's check digits are right (a code without any: True)."""
        return True


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Isin(_Code):
    """An ISIN (ISO 6166): country letters, nine characters and a Luhn check digit.
    Canonical form: uppercase."""

    name: ClassVar[str] = "isin"
    expected: ClassVar[str] = "an ISIN"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"[A-Z]{2}[A-Z0-9]{9}[0-9]")
    form: ClassVar[str] = "an ISIN (US0378331005)"
    check: ClassVar[str] = "ISIN check digit"

    def valid(self, code: str) -> bool:
        total = 0
        for index, char in enumerate(reversed(_alphanumeric_digits(code))):
            number = int(char) * (2 if index % 2 else 1)
            total += number - 9 if number > 9 else number
        return total % 10 == 0


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Lei(_Code):
    """A Legal Entity Identifier (ISO 17442): 18 characters and two ISO 7064 MOD 97-10 check
    digits. Canonical form: uppercase."""

    name: ClassVar[str] = "lei"
    expected: ClassVar[str] = "an LEI"
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"[A-Z0-9]{18}[0-9]{2}")
    form: ClassVar[str] = "an LEI (20 letters and digits)"
    check: ClassVar[str] = "LEI check digits"

    def valid(self, code: str) -> bool:
        return int(_alphanumeric_digits(code)) % 97 == 1


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Ticker(_Code):
    """An exchange ticker symbol: letters and digits, optionally joined by ``.``, ``-`` or
    ``/`` (``BRK.B``), at most 16 characters. Canonical form: uppercase."""

    name: ClassVar[str] = "ticker"
    expected: ClassVar[str] = "a ticker"
    # The lookahead holds the 16-character limit.
    pattern: ClassVar[re.Pattern[str]] = re.compile(r"(?=.{1,16}\Z)[A-Z0-9]+(?:[.\-/][A-Z0-9]+)*")
    form: ClassVar[str] = "a ticker symbol"


# -- language tags (BCP 47) ----------------------------------------------------------------------

_LANGTAG = re.compile(
    r"""
    (?:[a-z]{2,3}(?:-[a-z]{3}){0,3}|[a-z]{4}|[a-z]{5,8})   # language, extlangs
    (?:-[a-z]{4})?                                        # script
    (?:-(?:[a-z]{2}|[0-9]{3}))?                           # region
    (?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*              # variants
    (?:-[0-9a-wyz](?:-[a-z0-9]{2,8})+)*                   # extensions
    (?:-x(?:-[a-z0-9]{1,8})+)?                            # private use
    |x(?:-[a-z0-9]{1,8})+                                 # private use alone
    """,
    re.VERBOSE,
)
# RFC 5646 §2.2.8: the grandfathered tags, which the general syntax does not cover (the
# "regular" ones among them fit it already, save for their meaning).
_GRANDFATHERED = frozenset(
    {
        "en-gb-oed",
        "i-ami",
        "i-bnn",
        "i-default",
        "i-enochian",
        "i-hak",
        "i-klingon",
        "i-lux",
        "i-mingo",
        "i-navajo",
        "i-pwn",
        "i-tao",
        "i-tay",
        "i-tsu",
        "sgn-be-fr",
        "sgn-be-nl",
        "sgn-ch-de",
        "art-lojban",
        "cel-gaulish",
        "no-bok",
        "no-nyn",
        "zh-guoyu",
        "zh-hakka",
        "zh-min",
        "zh-min-nan",
        "zh-xiang",
    }
)


def _tag_case(tag: str) -> str:
    """RFC 5646 §2.1.1 case: regions upper, scripts title, the rest lower; after a singleton
    every subtag is lower."""
    subtags = tag.split("-")
    out = [subtags[0]]
    after_singleton = len(subtags[0]) == 1
    for subtag in subtags[1:]:
        if after_singleton:
            out.append(subtag)
        elif len(subtag) == 1:
            after_singleton = True
            out.append(subtag)
        elif len(subtag) == 2:
            out.append(subtag.upper())
        elif len(subtag) == 4 and subtag.isalpha():
            out.append(subtag.title())
        else:
            out.append(subtag)
    return "-".join(out)


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Language(_Notation):
    """A well-formed BCP 47 language tag (RFC 5646 syntax, grandfathered tags included), at
    most 128 characters. Canonical form: the RFC's case conventions (``en-GB``,
    ``zh-Hant-TW``, ``sr-Latn``)."""

    name: ClassVar[str] = "language"
    expected: ClassVar[str] = "a language tag"

    def parse(self, text: str, where: str) -> str:
        lowered = _ascii_lower(text)
        if len(text) > 128 or not (
            lowered in _GRANDFATHERED or _LANGTAG.fullmatch(lowered) is not None
        ):
            raise self.malformed(text, where, "a well-formed BCP 47 language tag (e.g. en, pt-BR)")
        return _tag_case(lowered)


# -- money, currency, quantity -------------------------------------------------------------------

# ISO 4217: the codes in use, plus those withdrawn since 1999 that historical filings still carry.
_ISO_4217 = """
    AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BOV BRL BSD
    BTN BWP BYN BZD CAD CDF CHE CHF CHW CLF CLP CNY COP COU CRC CUC CUP CVE CZK DJF DKK DOP
    DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR
    IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD
    MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB
    PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD
    SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD USN UYI UYU UYW UZS
    VED VES VND VUV WST XAF XAG XAU XBA XBB XBC XBD XCD XCG XDR XOF XPD XPF XPT XSU XTS XUA
    XXX YER ZAR ZMW ZWG ZWL
    ATS BEF CYP DEM EEK ESP FIM FRF GRD HRK IEP ITL LTL LUF LVL MTL NLG PTE SIT SKK
    AFA AZM BGL BYR CSD GHC MGF MRO MZM ROL SDD SRG STD TMM TRL VEB VEF YUM ZMK ZWD ZWN ZWR
"""
CURRENCIES = frozenset(_ISO_4217.split())


def _currency_param(text: str) -> str | None:
    code = _ascii_upper(text)
    return code if code in CURRENCIES else None


@dataclass(frozen=True, slots=True)
class _Currencies(Codec):
    """A codec of values in a currency, optionally one of ``currencies``: the parameter, how it
    compares for a compatible change and the currency's refusals (rules ``currency.*``)."""

    currencies: tuple[str, ...] | None = None

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Self:
        return cls(params.strings("currencies", _currency_param))

    def params(self) -> dict[str, Any]:
        return {"currencies": _sorted(self.currencies)}

    def widens(self, old: Codec) -> bool:
        # Only its own kind: sharing this base does not make money a currency.
        return isinstance(old, type(self)) and _superset(self.currencies, old.currencies)

    def currency(self, value: Any, where: str) -> str:
        text = _string(value, where, "currency", "an ISO 4217 currency code")
        code = _ascii_upper(text)
        if len(code) != 3 or code not in CURRENCIES:
            raise reject(where, "currency.code", f"{_show(text)} is not an ISO 4217 currency code")
        if self.currencies is not None and code not in self.currencies:
            raise _not_allowed(where, "currency.allowed", code, self.currencies)
        return code


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Currency(_Currencies):
    """An ISO 4217 currency code (``EUR``), optionally one of ``currencies``. Canonical form:
    uppercase."""

    name: ClassVar[str] = "currency"

    def canonical(self, value: Any, where: str) -> Any:
        return self.currency(value, where)


def _object(value: Any, where: str, codec: str, keys: tuple[str, ...], example: str) -> Any:
    if value is None:
        raise _null(where, codec)
    if type(value) is not dict or set(value) != set(keys):
        raise reject(
            where,
            f"{codec}.shape",
            f"{_show(value)} is not a {codec} value: an object with exactly"
            f" {' and '.join(keys)}, e.g. {example}",
        )
    return value


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Money(_Currencies):
    """``{"amount": "12.50", "currency": "EUR"}``: an exact decimal amount and an ISO 4217 code
    (optionally one of ``currencies``). Canonical form: the amount's canonical decimal, the code
    in uppercase. Amounts order within one currency."""

    name: ClassVar[str] = "money"

    def canonical(self, value: Any, where: str) -> Any:
        _object(
            value, where, "money", ("amount", "currency"), '{"amount": "9.99", "currency": "EUR"}'
        )
        return {
            "amount": canonical_decimal(value["amount"], f"{where}.amount"),
            "currency": self.currency(value["currency"], f"{where}.currency"),
        }

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        return (canonical["currency"], Decimal(canonical["amount"]))


_UNIT = re.compile(
    r"[^\s\x00-\x1f\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]{0,30}[^\s\x00-\x1f\x7f-\x9f])?"
)


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Quantity(Codec):
    """``{"value": "1.5", "unit": "°C"}``: an exact decimal and a unit (1 to 32 characters, kept
    exactly, since units are case-sensitive: mm is not Mm), optionally one of ``units``.
    Values order within one unit."""

    name: ClassVar[str] = "quantity"
    units: tuple[str, ...] | None = None

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Quantity:
        return cls(params.strings("units", lambda u: u if _UNIT.fullmatch(u) else None))

    def params(self) -> dict[str, Any]:
        return {"units": _sorted(self.units)}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Quantity) and _superset(self.units, old.units)

    def canonical(self, value: Any, where: str) -> Any:
        _object(value, where, "quantity", ("value", "unit"), '{"value": "1.5", "unit": "km"}')
        unit = _string(value["unit"], f"{where}.unit", "quantity", "a unit")
        if _UNIT.fullmatch(unit) is None:
            raise reject(
                f"{where}.unit",
                "quantity.unit",
                f"{_show(unit)} is not a unit (1 to 32 characters, no line breaks or"
                " surrounding spaces)",
            )
        if self.units is not None and unit not in self.units:
            raise _not_allowed(f"{where}.unit", "quantity.allowed", _show(unit), self.units)
        return {"value": canonical_decimal(value["value"], f"{where}.value"), "unit": unit}

    def order_key(self, canonical: Any) -> tuple[str, Any]:
        return (canonical["unit"], Decimal(canonical["value"]))


# -- structure: interval, reference, list --------------------------------------------------------


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Interval(Codec):
    """``{"low": X, "high": Y}`` with both bounds of the orderable codec ``of`` (integer,
    decimal, percent, date, datetime, money, quantity), ``low`` ≤ ``high``, both in the same
    unit or currency. Bounds are inclusive."""

    name: ClassVar[str] = "interval"
    of: Codec

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Interval:
        of = params.codec("of", codecs)
        probe = getattr(type(of), "order_key", None)
        if probe is Codec.order_key:
            raise params.error("of", f"the {of.name} codec has no order, so no interval")
        return cls(of)

    def params(self) -> dict[str, Any]:
        return {"of": self.of.spec()}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Interval) and self.of.widens(old.of)

    def canonical(self, value: Any, where: str) -> Any:
        _object(value, where, "interval", ("low", "high"), '{"low": "0.2", "high": "0.6"}')
        low = self.of.canonical(value["low"], f"{where}.low")
        high = self.of.canonical(value["high"], f"{where}.high")
        low_key, high_key = self.of.order_key(low), self.of.order_key(high)
        assert low_key is not None and high_key is not None
        if low_key[0] != high_key[0]:
            raise reject(
                where,
                "interval.dimension",
                f"low and high must share a unit or currency ({low_key[0]} vs {high_key[0]})",
            )
        if low_key[1] > high_key[1]:
            raise reject(where, "interval.order", "low must not be greater than high")
        return {"low": low, "high": high}


_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}")
_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class Reference(_Notation):
    """The name of another record (``<kind>:<slug>``), optionally of one of ``kinds``. The
    record need not exist (yet), as with links."""

    name: ClassVar[str] = "reference"
    expected: ClassVar[str] = "a record name"
    kinds: tuple[str, ...] | None = None

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> Reference:
        return cls(params.strings("kinds", lambda k: k if _KIND.fullmatch(k) else None))

    def params(self) -> dict[str, Any]:
        return {"kinds": _sorted(self.kinds)}

    def widens(self, old: Codec) -> bool:
        return isinstance(old, Reference) and _superset(self.kinds, old.kinds)

    def parse(self, text: str, where: str) -> str:
        if _NAME.fullmatch(text) is None:
            raise self.malformed(text, where, "a record name (<kind>:<slug>)")
        kind = text.partition(":")[0]
        if self.kinds is not None and kind not in self.kinds:
            raise reject(
                where,
                "reference.kind",
                f"{text} is a {kind}; this field refers to {' or '.join(self.kinds)}",
            )
        return text


@BUILTIN.register
@dataclass(frozen=True, slots=True)
class List(Codec):
    """A list of values of the codec ``of``, ``min_items`` (default 0) to ``max_items``
    (default 64) long, in the given order; ``unique`` refuses two equal values (compared by
    canonical form)."""

    name: ClassVar[str] = "list"
    of: Codec
    min_items: int = 0
    max_items: int = 64
    unique: bool = False

    @classmethod
    def build(cls, params: Params, codecs: Codecs) -> List:
        of = params.codec("of", codecs)
        items = _counts(params, "min_items", 0, "max_items", 64)
        return cls(of, *items, params.boolean("unique", False))

    def params(self) -> dict[str, Any]:
        return {
            "of": self.of.spec(),
            "min_items": self.min_items,
            "max_items": self.max_items,
            "unique": self.unique,
        }

    def widens(self, old: Codec) -> bool:
        return (
            isinstance(old, List)
            and self.of.widens(old.of)
            and _wider((self.min_items, self.max_items), (old.min_items, old.max_items))
            and (old.unique or not self.unique)
        )

    def canonical(self, value: Any, where: str) -> Any:
        if value is None:
            raise _null(where, "list")
        if type(value) is not list:
            raise reject(where, "list.type", f"{_show(value)} is not a list")
        if len(value) < self.min_items:
            raise reject(where, "list.min_items", f"the list needs at least {self.min_items} items")
        if len(value) > self.max_items:
            raise reject(
                where,
                "list.max_items",
                f"the list has {len(value)} items; at most {self.max_items}",
            )
        items = [self.of.canonical(item, f"{where}[{index}]") for index, item in enumerate(value)]
        if self.unique:
            seen: set[str] = set()
            for index, item in enumerate(items):
                key = canonical_text(item)
                if key in seen:
                    raise reject(
                        f"{where}[{index}]", "list.unique", "the list holds this value twice"
                    )
                seen.add(key)
        return items
