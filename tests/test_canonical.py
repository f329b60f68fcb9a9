"""Canonical JSON (SPEC §1, §8): RFC 8785 serialization, strict parsing, and what is refused.

Every digest in Oh rests on these rules, so each one is held by a test named after it, and the
serializer is checked byte for byte against the ``rfc8785`` reference implementation.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import math
import random
import struct
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oh.core.canonical import (
    MAX_DEPTH,
    MAX_INPUT_DEPTH,
    MAX_SAFE_INTEGER,
    canonical_bytes,
    canonical_text,
    check_json,
    input_value,
    matches_digest,
    nested_deeper_than,
    parse_input,
    parse_json,
    sha256_hex,
)
from oh.errors import InvalidArgument

PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Characters that RFC 8785 serializers get wrong most often: every escape class, DEL, the
# JavaScript line separators, the first non-ASCII code points, BMP characters above the
# surrogate block (which sort *after* astral characters in UTF-16) and astral characters.
TRICKY_CHARACTERS = (
    "\x00\x01\x07\x08\t\n\x0b\x0c\r\x0e\x0f\x1f \"'/\\\x7f\x80\x9f\xa0\xf6\xff"
    "\u0100\u2028\u2029\u20ac\ud7ff\ue000\ufb33\ufeff\ufffd\uffff"
    "\U00010000\U0001f600\U0010ffff"
)

characters = st.one_of(st.sampled_from(TRICKY_CHARACTERS), st.characters(codec="utf-8"))
strings = st.text(characters, max_size=10)
ascii_strings = st.text(st.characters(codec="ascii"), max_size=10)
safe_integers = st.one_of(
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
    st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 2**31, -(2**31), 2**32]),
)


def _double(bits: int) -> float:
    return float(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


# Every magnitude: hypothesis' own float strategy (biased to edge cases) plus uniformly random
# bit patterns, which reach every exponent from subnormals to 1.7976931348623157e+308.
finite_floats = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(0, 2**64 - 1).map(_double).filter(math.isfinite),
    st.integers(-(2**60), 2**60).map(float),
)


def _json(scalars: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)
        ),
        max_leaves=30,
    )


json_values = _json(
    st.one_of(st.none(), st.booleans(), safe_integers, finite_floats, strings), strings
)
# The fast path's subset: no floats and ASCII object keys (string values may be anything).
fast_path_values = _json(st.one_of(st.none(), st.booleans(), safe_integers, strings), ascii_strings)


def stdlib_encode(value: Any) -> str:
    return json.dumps(
        value, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":")
    )


def shuffled(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys inserted in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [shuffled(item, rng) for item in value]
    return value


def nested(depth: int, leaf: Any, container: str = "list") -> Any:
    """``leaf`` enclosed in ``depth`` containers."""
    value = leaf
    for _ in range(depth):
        value = [value] if container == "list" else {"k": value}
    return value


def assert_refused(call: Any, *args: Any) -> InvalidArgument:
    """``call(*args)`` raises InvalidArgument itself (code invalid_argument), nothing else."""
    with pytest.raises(InvalidArgument) as info:
        call(*args)
    assert type(info.value) is InvalidArgument
    assert info.value.code == "invalid_argument"
    return info.value


# --- the serializer is RFC 8785 -------------------------------------------------------------


@PROPERTY
@given(fast_path_values)
def test_fast_path_stdlib_encoder_is_byte_identical_to_rfc8785_on_its_subset(value: Any) -> None:
    expected = rfc8785.dumps(value)
    assert stdlib_encode(value).encode("utf-8") == expected
    assert canonical_text(value).encode("utf-8") == expected


@PROPERTY
@given(json_values)
def test_canonical_text_is_byte_identical_to_rfc8785(value: Any) -> None:
    assert canonical_text(value).encode("utf-8") == rfc8785.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        1.0,
        -0.0,
        1e20,
        1e-7,
        [0.1, 100.0],
        # an astral key sorts before U+FB33 in UTF-16 code units, after it in code points
        {"\U0001f600": 1, "\ufb33": 2},
        {"\ue000": 1, "\U00010000": 2},
    ],
)
def test_canonical_text_is_exact_where_the_stdlib_encoder_is_not(value: Any) -> None:
    assert stdlib_encode(value).encode("utf-8") != rfc8785.dumps(value)
    assert canonical_text(value).encode("utf-8") == rfc8785.dumps(value)


@PROPERTY
@given(json_values)
def test_canonical_bytes_is_the_utf8_of_canonical_text(value: Any) -> None:
    assert canonical_bytes(value) == canonical_text(value).encode("utf-8")


@PROPERTY
@given(json_values, st.randoms(use_true_random=False))
def test_digest_is_stable_under_key_order_and_reserialization(
    value: Any, rng: random.Random
) -> None:
    digest = sha256_hex(canonical_bytes(value))
    assert sha256_hex(canonical_bytes(shuffled(value, rng))) == digest
    for text in (json.dumps(shuffled(value, rng)), json.dumps(value, indent=2, ensure_ascii=False)):
        assert sha256_hex(canonical_bytes(json.loads(text))) == digest
        assert sha256_hex(canonical_bytes(parse_json(text))) == digest


# Regression: integral doubles in [2^53, 1e21) are written as plain digits by RFC 8785
# and must parse back to the same canonical text.
@PROPERTY
@given(json_values)
@example({"x": 1e20})
@example([2.0**53, -(2.0**60), 9.999999999999999e20])
def test_parsing_canonical_text_gives_back_the_same_canonical_text(value: Any) -> None:
    text = canonical_text(value)
    assert canonical_text(parse_json(text)) == text
    assert canonical_text(parse_json(text.encode("utf-8"))) == text


# --- RFC 8785 test vectors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ieee_hex", "expected"),
    [  # RFC 8785 Appendix B
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ],
)
def test_rfc8785_number_serialization_vectors(ieee_hex: str, expected: str) -> None:
    assert canonical_text(_double(int(ieee_hex, 16))) == expected


def test_rfc8785_numbers_vector() -> None:
    text = '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]}'
    assert canonical_text(parse_json(text)) == (
        '{"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27]}'
    )


def test_rfc8785_string_escaping_vector() -> None:
    text = r'"\u20ac$\u000F\u000aA' + "'" + r'\u0042\u0022\u005c\\\"\/"'
    assert canonical_text(parse_json(text)) == r'"€$\u000f\nA' + "'" + r'B\"\\\\\"/"'


def test_rfc8785_full_example() -> None:  # RFC 8785 §3.2.2
    text = r"""{
      "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
      "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
      "literals": [null, true, false]
    }"""
    assert canonical_text(parse_json(text)) == (
        r'{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        r'"string":"€$\u000f\nA' + "'" + r'B\"\\\\\"/"}'
    )


def test_rfc8785_object_keys_sort_by_utf16_code_units() -> None:  # RFC 8785 §3.2.3
    text = r"""{
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis"
    }"""
    assert canonical_text(parse_json(text)) == (
        '{"\\r":"Carriage Return","1":"One","\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis","\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )


def test_control_characters_escape_as_lowercase_hex_and_others_stay_literal() -> None:
    value = "\x00\x1f\x7f\u2028\u2029\U0001f600/\b\f\n\r\t"
    assert canonical_text(value) == '"\\u0000\\u001f\x7f\u2028\u2029\U0001f600/\\b\\f\\n\\r\\t"'


def test_surrogate_pair_escapes_are_one_astral_character() -> None:
    assert parse_json(r'"\ud83d\ude00"') == "\U0001f600"
    assert canonical_text(parse_json(r'{"\ud83d\ude00":1}')) == '{"\U0001f600":1}'


# --- what cannot be canonicalized is refused, always as invalid_argument ----------------------


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("wrap", [lambda v: v, lambda v: [1, v], lambda v: {"a": {"b": v}}])
def test_nan_and_infinity_are_refused(number: float, wrap: Any) -> None:
    assert_refused(check_json, wrap(number))
    assert_refused(canonical_text, wrap(number))


@pytest.mark.parametrize(
    "text",
    [
        "NaN",
        "Infinity",
        "-Infinity",
        "[1, NaN]",
        '{"a": Infinity}',
        "1e400",
        "-1e400",
        "[1E999]",
        "1e-400",
        "[-2.5E-999]",
    ],
)
def test_nan_infinity_and_numbers_no_double_holds_in_json_text_are_refused(text: str) -> None:
    assert_refused(parse_json, text)
    assert_refused(parse_input, text)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("6.022e23", "6.022e+23"),
        ("5.972E24", "5.972e+24"),
        ("1e21", "1e+21"),
        ("1e300", "1e+300"),
        ("1e20", "100000000000000000000"),
        ("-2.5e+30", "-2.5e+30"),
        ("5e-324", "5e-324"),
        ("0e-400", "0"),
        ("2.0", "2"),
    ],
)
def test_a_number_with_a_fraction_or_an_exponent_is_a_double(text: str, canonical: str) -> None:
    """As RFC 8785 and JavaScript read it: kept by its canonical form, never refused for being
    integral and large (an integer literal is, below)."""
    for parse in (parse_json, parse_input):
        value = parse(f"[{text}]")
        assert canonical_text(value) == f"[{canonical}]"
        assert parse_json(canonical_text(value)) == value  # stored, it reads back the same
    assert canonical_text(input_value([float(text)])) == f"[{canonical}]"
    if canonical.isdigit() and int(canonical) > MAX_SAFE_INTEGER:
        # RFC 8785 writes a double from 2^53 to 1e21 in digits; sent as input, digits are an
        # integer literal, refused: a client writes such a double with an exponent.
        assert_refused(parse_input, canonical)


@pytest.mark.parametrize(
    "bad", [chr(0xD800), chr(0xDFFF), f"a{chr(0xDC00)}b", chr(0xDE00) + chr(0xD83D)]
)
@pytest.mark.parametrize("where", ["string", "key", "nested key"])
def test_lone_surrogates_are_refused(bad: str, where: str) -> None:
    value = {"string": [bad], "key": {bad: 1}, "nested key": [{"ok": {bad: None}}]}[where]
    assert_refused(check_json, value)
    assert_refused(canonical_text, value)


@pytest.mark.parametrize(
    "text",
    [
        r'"\ud800"',
        r'"\udfff"',
        r'"x\ud83d"',
        r'"\ude00\ud83d"',
        r'{"\ud800": 1}',
        r'[{"a": "\udc00"}]',
    ],
)
def test_lone_surrogate_escapes_in_json_text_are_refused(text: str) -> None:
    assert_refused(parse_json, text)


@pytest.mark.parametrize("number", [MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 0])
def test_integers_within_plus_minus_2_53_minus_1_are_accepted(number: int) -> None:
    assert canonical_text([number]) == f"[{number}]"
    assert parse_json(str(number)) == number


@pytest.mark.parametrize("number", [2**53, -(2**53), 2**53 + 1, 10**30, -(10**400)])
def test_integers_outside_plus_minus_2_53_minus_1_are_refused(number: int) -> None:
    assert MAX_SAFE_INTEGER == 2**53 - 1
    assert_refused(check_json, {"n": number})
    assert_refused(canonical_text, [number])


@pytest.mark.parametrize(
    "text",
    ["9007199254740993", "-9007199254740993", "1" + "0" * 30, "12345678901234567891", "9" * 400],
)
def test_integers_in_json_text_that_would_lose_precision_are_refused(text: str) -> None:
    assert_refused(parse_json, f"[{text}]")


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 1}',
        '{"a": 1, "b": 2, "a": 3}',
        '{"a": 1, "\\u0061": 2}',  # the same key, spelled with an escape
        '[{"x": {"y": 1, "y": 2}}]',
        '{"\\ud83d\\ude00": 1, "\U0001f600": 2}',
    ],
)
def test_duplicate_keys_in_json_text_are_refused(text: str) -> None:
    assert_refused(parse_json, text)


@pytest.mark.parametrize("key", [1, None, True, 1.5, (1, 2), b"a"])
def test_object_keys_must_be_strings(key: Any) -> None:
    assert_refused(check_json, {key: 1})
    assert_refused(canonical_text, [{"ok": {key: 1}}])


@pytest.mark.parametrize("container", ["list", "dict"])
@pytest.mark.parametrize("leaf", [1, "s", [], {}])
def test_values_nested_up_to_max_depth_are_accepted(container: str, leaf: Any) -> None:
    value = nested(MAX_DEPTH, leaf, container)
    check_json(value)
    assert canonical_text(parse_json(canonical_text(value))) == canonical_text(value)


@pytest.mark.parametrize("container", ["list", "dict"])
@pytest.mark.parametrize("leaf", [1, "s", [], {}])
@pytest.mark.parametrize("extra", [1, 2, 5000])
def test_nesting_deeper_than_max_depth_is_refused(container: str, leaf: Any, extra: int) -> None:
    value = nested(MAX_DEPTH + extra, leaf, container)
    assert_refused(check_json, value)
    assert_refused(canonical_text, value)
    if extra < 100:
        assert_refused(parse_json, stdlib_encode(value))


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 500, 100_000])
def test_deeply_nested_json_text_is_refused(depth: int) -> None:
    assert_refused(parse_json, "[" * depth + "0" + "]" * depth)
    assert_refused(parse_json, '{"a":' * depth + "1" + "}" * depth)


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset(),
        b"bytes",
        bytearray(b"x"),
        object(),
        1j,
        decimal.Decimal("1.5"),
        datetime.date(2024, 1, 1),
        range(3),
        print,
    ],
)
def test_non_json_types_are_refused(value: Any) -> None:
    assert_refused(check_json, value)
    assert_refused(canonical_text, {"a": [value]})


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "{",
        "[1,]",
        '{"a":1,}',
        "{'a': 1}",
        '{"a" 1}',
        "01",
        "1 2",
        "undefined",
        '"\\x41"',
        '"unterminated',
        "\ufeff{}",
        b"\xff\xfe\x00",
        b'"\xc3\x28"',
        "1" * 5000,
    ],
)
def test_malformed_json_text_is_refused(text: str | bytes) -> None:
    assert_refused(parse_json, text)


def test_sha256_hex_is_the_hex_sha256_of_the_utf8_bytes() -> None:
    assert sha256_hex("é") == hashlib.sha256("é".encode()).hexdigest()
    assert sha256_hex(b"\x00") == hashlib.sha256(b"\x00").hexdigest()
    assert sha256_hex(canonical_text({})) == hashlib.sha256(b"{}").hexdigest()


@PROPERTY
@given(json_values)
def test_content_matches_exactly_the_digest_computed_from_it(value: Any) -> None:
    text = canonical_text(value)
    digest = sha256_hex(text)
    assert matches_digest(text, digest)
    assert matches_digest(text.encode("utf-8"), digest)  # bytes (a BLOB column) hash the same
    assert not matches_digest(text + " ", digest)
    assert not matches_digest(text, digest.upper())
    assert not matches_digest(text, digest[:-1])
    assert not matches_digest(text, None)


def test_content_altered_by_one_character_no_longer_matches() -> None:
    text = canonical_text({"name": "note:a", "text": "bleaching at 29.4C \u00e9 \U0001f600"})
    digest = sha256_hex(text)
    assert not matches_digest(text.replace("29.4", "29.5"), digest)
    assert not matches_digest(text.replace("\u00e9", "e"), digest)
    assert not matches_digest("", digest)


# --- no input, however malformed, raises anything but InvalidArgument ------------------------

_hostile_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(),
    st.text(st.characters(), max_size=6),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    st.binary(max_size=4),
    st.complex_numbers(),
    st.builds(object),
    st.integers(MAX_DEPTH - 2, 3000).map(lambda depth: nested(depth, 1)),
)
_hostile_keys = st.one_of(
    st.text(st.characters(), max_size=4), st.integers(), st.none(), st.floats()
)
hostile_values = st.recursive(
    _hostile_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(_hostile_keys, inner, max_size=4),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=20,
)


@FUZZ
@given(hostile_values)
def test_any_value_is_canonicalized_or_refused_as_invalid_argument(value: Any) -> None:
    try:
        text = canonical_text(value)
    except InvalidArgument as exc:
        refusal = exc
    else:
        assert text.encode("utf-8") == rfc8785.dumps(value)
        return
    assert refusal.code == "invalid_argument"


def _dumps_or_empty(value: Any) -> str:
    try:
        return json.dumps(value, default=repr, allow_nan=True)
    except (TypeError, ValueError, RecursionError):
        return ""


json_ish_text = st.one_of(
    st.text(st.sampled_from('[]{}",:0123456789.eE+-tfnrulasNIy\\u \t\nd8c0'), max_size=40),
    st.text(max_size=20),
    json_values.map(json.dumps),
    hostile_values.map(_dumps_or_empty).filter(bool),
)


@FUZZ
@given(st.one_of(json_ish_text, st.binary(max_size=30)))
def test_any_text_is_parsed_or_refused_as_invalid_argument(text: str | bytes) -> None:
    try:
        value = parse_json(text)
    except InvalidArgument as exc:
        refusal = exc
    else:
        check_json(value)
        return
    assert refusal.code == "invalid_argument"


# -- the reader of request bodies ---------------------------------------------------------------


def _lists(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_body_nests_at_most_64_levels() -> None:
    assert parse_input(_lists(MAX_INPUT_DEPTH)) is not None
    assert parse_input('{"a": ' + _lists(MAX_INPUT_DEPTH - 1) + "}")["a"] is not None
    for text in (_lists(MAX_INPUT_DEPTH + 1), '{"a": ' + _lists(MAX_INPUT_DEPTH) + "}"):
        with pytest.raises(InvalidArgument, match="nested deeper than 64 levels"):
            parse_input(text)


def test_brackets_in_strings_are_not_nesting() -> None:
    assert parse_input(json.dumps({"a": "[{" * 5000})) == {"a": "[{" * 5000}


def test_an_envelope_around_the_body_does_not_count() -> None:
    message = '{"params": {"arguments": ' + _lists(MAX_INPUT_DEPTH) + "}}"
    assert parse_input(message, envelope=2)["params"]["arguments"] is not None
    with pytest.raises(InvalidArgument, match="nested deeper than 64 levels"):
        parse_input(message)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none(), lambda inner: st.lists(inner, max_size=3), max_leaves=80))
def test_nesting_is_measured_exactly(value: Any) -> None:
    def depth(item: Any) -> int:
        return 1 + max(map(depth, item), default=0) if isinstance(item, list) else 0

    for limit in range(12):
        assert nested_deeper_than(value, limit) == (depth(value) > limit) or not isinstance(
            value, list
        )
