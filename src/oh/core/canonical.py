"""Canonical JSON (RFC 8785, JSON Canonicalization Scheme), strict JSON parsing, and digests.

Every digest in Oh is ``sha256`` over the RFC 8785 form of a value, so the same content has the
same digest on every backend and platform. ``rfc8785`` is the reference serializer; values
without floats and with ASCII object keys take a fast path through the standard library's C
encoder, whose output is byte-identical to RFC 8785 for exactly that subset (a property test
holds the two equal).

Only values JSON can carry without loss are accepted: no NaN or Infinity, no integers outside
±(2^53−1), no lone surrogates, string keys only, bounded nesting.

Input (a request body, a tool's arguments) is read by one rule on every transport, in
``parse_input`` for JSON text and ``input_value`` for values a library caller built:

* an integer literal (digits, no fraction, no exponent) must lie within ±(2^53−1), the integers
  every JSON reader keeps exactly: a longer one, such as an id ``9007199254740993``, would be
  read by some readers as another number, so it is refused (send it as text);
* every other number is an IEEE 754 double, as RFC 8785 and JavaScript read it, and is kept by
  its RFC 8785 form: ``6.022e23`` is stored as ``6.022e+23``, ``1e21`` as ``1e+21``. One whose
  value is a safe integer is that integer (``2.0`` and ``2e0`` are 2, as JSON Schema counts);
* a literal a double cannot hold is refused, never changed: one too large (``1e400``) and one
  that underflows to zero (``1e-400``).

The same goes for Python values: an ``int`` outside ±(2^53−1) is refused, a ``float`` is a
double. Duplicate object keys, NaN and Infinity are refused. A request body nests at most
``MAX_INPUT_DEPTH`` (64) levels of arrays and objects, whichever transport carries it (over MCP
the limit counts from the tool call's arguments, not from the JSON-RPC envelope around them).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import rfc8785

from oh.errors import InvalidArgument

__all__ = [
    "CANONICAL_STRING",
    "MAX_DEPTH",
    "MAX_INPUT_DEPTH",
    "MAX_SAFE_INTEGER",
    "canonical_bytes",
    "canonical_string",
    "canonical_text",
    "check_json",
    "input_value",
    "load_canonical",
    "matches_digest",
    "nested_deeper_than",
    "parse_input",
    "parse_json",
    "sha256_hex",
]

MAX_SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 32
# How deep a request body may nest: far above any valid call (a record's ``fields`` sit four
# levels down and nest at most ``MAX_DEPTH``), and far below what any JSON parser on the way
# refuses (the MCP SDK's parser stops at about 200 levels), so every transport reads one body
# alike.
MAX_INPUT_DEPTH = 64

_fast_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
)

# One string as RFC 8785 writes it: the standard library's writer with ensure_ascii=False
# escapes exactly '"', '\\' and the control characters (\b \t \n \f \r, the others as
# \u00xx in lowercase hex) and leaves every other character literal, as RFC 8785 does. That
# holds for any string without a lone surrogate; callers that skip validation find those when
# they encode the result to UTF-8, which fails on them.
canonical_string: Callable[[str], str] = json.encoder.encode_basestring

# A regular expression for exactly the strings ``canonical_string`` writes for strings without
# a lone surrogate: literal characters other than '"', '\\', controls and surrogates, and the
# escapes RFC 8785 uses. A text made only of such strings and fixed punctuation is canonical.
CANONICAL_STRING = (
    r'"(?:[^"\\\x00-\x1f\ud800-\udfff]++|\\(?:["\\bfnrt]|u00(?:0[0-7bef]|1[0-9a-f])))*+"'
)


def _check_string(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"{where}: string contains a lone surrogate") from None


def _walk(value: Any, depth: int, where: str) -> bool:
    """Validate ``value``; return True when the fast encoder is not exact for it."""
    if depth > MAX_DEPTH:
        raise InvalidArgument(f"{where}: nested deeper than {MAX_DEPTH} levels")
    kind = type(value)
    if kind is str:
        _check_string(value, where)
        return False
    if kind is bool or value is None:
        return False
    if kind is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise InvalidArgument(f"{where}: integer outside ±(2^53-1)")
        return False
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidArgument(f"{where}: NaN and Infinity are not JSON")
        return True
    if kind is list or kind is tuple:
        slow = False
        for item in value:
            slow = _walk(item, depth + 1, where) or slow
        return slow
    if kind is dict:
        slow = False
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidArgument(f"{where}: object keys must be strings")
            _check_string(key, where)
            if not key.isascii():
                slow = True
            slow = _walk(item, depth + 1, where) or slow
        return slow
    raise InvalidArgument(f"{where}: {kind.__name__} is not a JSON value")


def check_json(value: Any, where: str = "value") -> None:
    """Raise ``InvalidArgument`` unless ``value`` can be canonicalized without loss."""
    _walk(value, 0, where)


def canonical_text(value: Any, where: str = "value", *, depth: int = 0) -> str:
    """The RFC 8785 serialization of ``value`` as text.

    ``depth`` is how deep ``value`` sits inside the document it belongs to, so that the
    nesting limit counts from the document's root when a member is serialized on its own (the
    canonical form of a member is exactly the text it has inside its document).
    """
    if _walk(value, depth, where):
        try:
            return str(rfc8785.dumps(value).decode("utf-8"))
        except rfc8785.CanonicalizationError as exc:  # pragma: no cover - _walk screens first
            raise InvalidArgument(f"{where}: {exc}") from exc
    return _fast_encoder.encode(value)


def canonical_bytes(value: Any, where: str = "value") -> bytes:
    """The RFC 8785 serialization of ``value`` as UTF-8 bytes."""
    return canonical_text(value, where).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def matches_digest(content: bytes | str, digest: str | None) -> bool:
    """Whether ``content`` is what ``digest`` was computed from (its sha256 hex, recomputed).

    Every check of content against the digest stored or sent with it is this comparison; what a
    mismatch means (a refusal, a reported problem, a note left unembedded) is the caller's. It
    is on the path of every ``read``, so it hashes inline rather than through ``sha256_hex``.
    """
    if isinstance(content, str):
        content = content.encode("utf-8")
    return hashlib.sha256(content).hexdigest() == digest


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, item in pairs:
        if key in result:
            raise InvalidArgument(f"duplicate object key {key!r}")
        result[key] = item
    return result


def _no_constant(name: str) -> Any:
    raise InvalidArgument(f"{name} is not a JSON value")


def _parse_int(text: str) -> int | float:
    value = int(text)
    if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value
    # RFC 8785 writes an integral double below 1e21 as plain digits (1e20 ->
    # "100000000000000000000"), so digits that are exactly such a double's canonical form are
    # that double; any other digits would lose precision and are refused.
    number = float(text)
    if math.isfinite(number) and canonical_text(number) == text:
        return number
    raise InvalidArgument("integer outside ±(2^53-1)")


def _parse_float(text: str) -> float:
    return _double(text.lower())


def parse_json(text: str | bytes, where: str = "JSON") -> Any:
    """Parse JSON strictly: duplicate keys, NaN/Infinity, lone surrogates and values that cannot
    be canonicalized are refused with ``InvalidArgument``."""
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_no_constant,
            parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except InvalidArgument:
        raise
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{where} is not valid JSON: {exc}") from None
    check_json(value, where)
    return value


_UNSAFE_INTEGER = (
    "an integer outside ±(2^53-1), which not every JSON reader keeps exactly: send an id as"
    " text; a quantity written with a fraction or an exponent (6.022e23) is a double"
)


def _input_int(text: str) -> int:
    # More than 16 digits cannot be within ±(2^53-1); a long run must not reach int().
    if len(text.lstrip("-")) > 16:
        raise InvalidArgument(_UNSAFE_INTEGER)
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise InvalidArgument(_UNSAFE_INTEGER)
    return value


def _double(text: str) -> float:
    """A number literal with a fraction or an exponent, as the IEEE 754 double it names; one a
    double cannot hold is refused, never changed (too large, or so small it would read as 0)."""
    value = float(text)
    if not math.isfinite(value):
        raise InvalidArgument(f"{text[:32]} is too large for a JSON number (an IEEE 754 double)")
    if value == 0 and any(digit in "123456789" for digit in text.partition("e")[0].lower()):
        raise InvalidArgument(
            f"{text[:32]} is too small for a JSON number (an IEEE 754 double): it would read as 0"
        )
    return value


def _input_float(text: str) -> int | float:
    value = _double(text.lower())
    if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return int(value)  # 2.0 is 2
    return value


# Writes any JSON value (keys in their order, strings as they are): encoding its output as UTF-8
# fails exactly when a string holds a lone surrogate, which is all ``parse_input`` still has to
# look for once ``json.loads`` and its hooks are done, at C speed.
_plain_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects in ``value`` nest more than ``limit`` levels (``[]`` is one)."""
    if type(value) is not dict and type(value) is not list:
        return limit < 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > limit:
            return True
        for child in item.values() if type(item) is dict else item:
            if type(child) is dict or type(child) is list:
                pending.append((child, depth + 1))
    return False


def parse_input(text: str | bytes, where: str = "request body", *, envelope: int = 0) -> Any:
    """Parse JSON that arrives from outside: duplicate keys, NaN, Infinity and lone surrogates
    refused, numbers read by the rule of this module's docstring (an integer literal outside
    ±(2^53-1) is refused; any other number is a double, an int when its value is a safe
    integer), and nesting deeper than ``MAX_INPUT_DEPTH`` refused, not
    counting ``envelope`` levels around the body (a transport's message; the transport checks
    the body inside it with ``nested_deeper_than``).

    Bytes must be UTF-8. Every transport reads a body with this function, so one body means one
    thing over HTTP, MCP and stdio. (Values a library caller builds meet the limits where they
    are used, as a record's ``fields``.)
    """
    if isinstance(text, bytes | bytearray):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidArgument(f"{where} is not UTF-8") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_no_constant,
            parse_int=_input_int,
            parse_float=_input_float,
        )
        _plain_encoder.encode(value).encode("utf-8")
    except InvalidArgument:
        raise
    except UnicodeEncodeError:
        raise InvalidArgument(f"{where}: a string holds a lone surrogate") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{where} is not valid JSON: {exc}") from None
    # Brackets in strings count too: this only spares the walk to bodies that cannot nest deep.
    limit = MAX_INPUT_DEPTH + envelope
    if text.count("[") + text.count("{") > limit and nested_deeper_than(value, limit):
        raise InvalidArgument(f"{where}: nested deeper than {MAX_INPUT_DEPTH} levels")
    return value


def _input(value: Any, where: str) -> Any:
    """``value`` under the input rule: the same object when nothing changes, otherwise a copy in
    which every integral float is an int (containers are copied only along a changed path)."""
    kind = type(value)
    if kind is str:
        if not value.isascii():
            _check_string(value, where)
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            raise InvalidArgument(f"{where}: {_UNSAFE_INTEGER}")
        return value
    if kind is float:
        if not math.isfinite(value):
            raise InvalidArgument(f"{where}: NaN and Infinity are not JSON")
        if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return int(value)  # 5.0 is 5
        return value  # a double: 6.022e23 stays one
    if kind is list or kind is tuple:
        items = None
        for index, item in enumerate(value):
            read = _input(item, where)
            if read is not item:
                if items is None:
                    items = list(value)
                items[index] = read
        if items is None:
            return value
        return items if kind is list else tuple(items)
    if kind is dict:
        changed = None
        for key, item in value.items():
            if type(key) is not str:
                raise InvalidArgument(f"{where}: object keys must be strings")
            if not key.isascii():
                _check_string(key, where)
            read = _input(item, where)
            if read is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = read
        return value if changed is None else changed
    raise InvalidArgument(f"{where}: {kind.__name__} is not a JSON value")


def input_value(value: Any, where: str = "arguments") -> Any:
    """A value a library caller built, read by the same rule as ``parse_input``: ``5.0`` is 5,
    an ``int`` outside ±(2^53-1) is refused, a ``float`` is a double (``6.022e23`` stays one),
    and anything JSON cannot carry is refused.
    Returns ``value`` itself when nothing changes. Nesting is limited where a value is used."""
    try:
        return _input(value, where)
    except RecursionError:
        raise InvalidArgument(f"{where}: nested too deep") from None


def load_canonical(text: str) -> Any:
    """Parse text already known to be canonical JSON (e.g. verified by digest): fast, with the
    same number reading as ``parse_json`` but none of its checks."""
    return _CANONICAL_DECODER(text)


# One decoder for every ``load_canonical``: ``json.loads`` with a keyword builds a new one per
# call, which is about a tenth of a ``read`` tool call.
_CANONICAL_DECODER = json.JSONDecoder(parse_int=_parse_int).decode
