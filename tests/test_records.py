"""Records (SPEC §1): the name pattern, what a caller may write, the seven digested keys, the
digest, and the integrity check on stored records."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from oh.core.canonical import MAX_SAFE_INTEGER, canonical_text, parse_json, sha256_hex
from oh.core.records import (
    CONTENT_KEYS,
    MAX_FIELDS_BYTES,
    MAX_LINKS,
    MAX_TEXT,
    NAME_PATTERN,
    PLAIN_RECORD,
    Record,
    StoredRecord,
    check_name,
    kind_of,
)
from oh.errors import IntegrityError, InvalidArgument

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

SPEC_NAME_PATTERN = r"^[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}$"
LINK_KEYS = ("depends_on", "supports", "contradicts")

names = st.from_regex(r"[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}", fullmatch=True)
# Few kinds and short slugs, so that names collide across changes and writes.
short_names = st.builds(
    "{}:{}{}".format,
    st.sampled_from(["lead", "finding", "k_9"]),
    st.sampled_from("ab09"),
    st.text("ab9._-", max_size=3),
)
texts = st.text(
    st.one_of(st.characters(codec="utf-8"), st.sampled_from("\x00\n\u2028\U0001f600")),
    max_size=40,
)
field_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False),
        texts,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)
fields_objects = st.dictionaries(texts, field_values, max_size=4)


@st.composite
def record_inputs(draw: st.DrawFn) -> dict[str, Any]:
    """A valid caller-supplied record, optional keys present or absent at random."""
    name = draw(names)
    value: dict[str, Any] = {"name": name, "text": draw(texts)}
    if draw(st.booleans()):
        value["kind"] = kind_of(name)
    if draw(st.booleans()):
        value["fields"] = draw(fields_objects)
    for key in LINK_KEYS:
        if draw(st.booleans()):
            value[key] = draw(
                st.lists(short_names.filter(lambda n, own=name: n != own), max_size=4, unique=True)
            )
    return value


def record(**overrides: Any) -> Record:
    return Record.parse({"name": "lead:reef-survey-2016", "text": "methods missing", **overrides})


def stored(rec: Record, **overrides: Any) -> StoredRecord:
    value = StoredRecord(
        name=rec.name,
        kind=rec.kind,
        content=rec.canonical(),
        digest=rec.digest,
        author="agent:run-1",
        written_at="2024-05-01T12:00:00Z",
        version=8,
    )
    return dataclasses.replace(value, **overrides)


def assert_refused(value: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        Record.parse(value)
    assert type(info.value) is InvalidArgument
    assert info.value.code == "invalid_argument"
    return info.value


# --- names ----------------------------------------------------------------------------------


def test_name_pattern_is_the_spec_pattern() -> None:
    assert NAME_PATTERN == SPEC_NAME_PATTERN


@pytest.mark.parametrize(
    "name",
    [
        "lead:reef-survey-2016",
        "finding:bleaching-threshold",
        "a:b",
        "a:0",
        "a_1:x.y_z-0",
        "k" * 32 + ":s",
        "k:" + "s" * 120,
        "k" * 32 + ":" + "0" * 120,
        "a:b..",
        "a:1-",
    ],
)
def test_name_matching_the_pattern_is_accepted(name: str) -> None:
    assert check_name(name) == name
    assert Record.parse({"name": name, "text": ""}).name == name


@pytest.mark.parametrize(
    "name",
    [
        "k" * 33 + ":s",  # kind longer than 32
        "k:" + "s" * 121,  # slug longer than 120
        "Lead:x",
        "lead:X",
        "lead",
        "lead:",
        ":x",
        "",
        "1lead:x",
        "_lead:x",
        "lead:-x",
        "lead:.x",
        "lead:_x",
        "le-ad:x",
        "le.ad:x",
        "lead:x y",
        "lead:x:y",
        "lead:x/y",
        "lead:x\n",
        "\nlead:x",
        " lead:x",
        "lé:x",
        "lead:ü",
        "lead:\uff11",  # fullwidth digit one
        "lead:x\x00",
    ],
)
def test_name_not_matching_the_pattern_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgument):
        check_name(name)
    assert_refused({"name": name, "text": ""})


@pytest.mark.parametrize("name", [None, 1, b"lead:x", ["lead:x"], {"lead": "x"}])
def test_name_must_be_a_string(name: Any) -> None:
    assert_refused({"name": name, "text": ""})


def test_name_is_required() -> None:
    assert_refused({"text": "no name"})


@PROPERTY
@given(st.one_of(names, st.text(max_size=12), st.text("abz09_:.-A ", max_size=12)))
def test_a_name_is_accepted_exactly_when_it_matches_the_spec_pattern(name: str) -> None:
    if re.fullmatch(SPEC_NAME_PATTERN[1:-1], name):
        assert check_name(name) == name
    else:
        with pytest.raises(InvalidArgument):
            check_name(name)


# --- kind -----------------------------------------------------------------------------------


@PROPERTY
@given(names)
def test_kind_is_the_name_prefix(name: str) -> None:
    rec = Record.parse({"name": name, "text": ""})
    assert rec.kind == kind_of(name) == name.split(":")[0]
    assert rec.content()["kind"] == rec.kind


def test_kind_input_equal_to_the_prefix_is_accepted() -> None:
    assert record(kind="lead") == record()


@pytest.mark.parametrize("kind", ["finding", "Lead", "lead:", "", "lead ", None, 1, ["lead"]])
def test_kind_input_other_than_the_prefix_is_refused(kind: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", "kind": kind})


# --- text -----------------------------------------------------------------------------------


@pytest.mark.parametrize("char", ["a", "é", "\U0001f600"])
def test_text_of_4000_characters_is_accepted(char: str) -> None:
    assert MAX_TEXT == 4000
    assert record(text=char * 4000).text == char * 4000


@pytest.mark.parametrize("char", ["a", "\U0001f600"])
def test_text_of_4001_characters_is_refused(char: str) -> None:
    assert_refused({"name": "lead:x", "text": char * 4001})


@pytest.mark.parametrize("text", [None, 1, ["text"], {"t": 1}, b"bytes"])
def test_text_is_required_and_a_string(text: Any) -> None:
    assert_refused({"name": "lead:x", "text": text})
    assert_refused({"name": "lead:x"})


def test_text_with_a_lone_surrogate_is_refused() -> None:
    assert_refused({"name": "lead:x", "text": "half \ud83d of an emoji"})


# --- fields ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fields", [[], [1], "x", 1, True, (("a", 1),)])
def test_fields_must_be_an_object(fields: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", "fields": fields})


@pytest.mark.parametrize(
    "fields",
    [
        {"x": math.nan},
        {"x": [math.inf]},
        {"x": 2**53},
        {"\udc00": 1},
        {"x": {1: 2}},
        {"x": {1, 2}},
        {"x": b"raw"},
    ],
)
def test_fields_must_be_canonical_json(fields: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", "fields": fields})


def test_fields_of_the_size_cap_are_accepted() -> None:
    fields = {"a": "x" * (MAX_FIELDS_BYTES - len('{"a":""}'))}
    assert len(canonical_text(fields).encode()) == MAX_FIELDS_BYTES
    assert record(fields=fields).fields == fields


def test_fields_over_the_size_cap_are_refused() -> None:
    fields = {"a": "x" * (MAX_FIELDS_BYTES - len('{"a":""}') + 1)}
    assert_refused({"name": "lead:x", "text": "", "fields": fields})
    # the cap counts UTF-8 bytes of the canonical form, not characters
    assert_refused({"name": "lead:x", "text": "", "fields": {"a": "é" * (MAX_FIELDS_BYTES // 2)}})


# --- links ----------------------------------------------------------------------------------

LINK_NAMES = [f"lead:n{i:03d}" for i in range(MAX_LINKS + 1)]


@pytest.mark.parametrize("key", LINK_KEYS)
def test_link_list_of_64_names_is_accepted(key: str) -> None:
    assert MAX_LINKS == 64
    assert len(getattr(record(**{key: LINK_NAMES[:64]}), key)) == 64


@pytest.mark.parametrize("key", LINK_KEYS)
def test_link_list_of_65_names_is_refused(key: str) -> None:
    assert_refused({"name": "lead:x", "text": "", key: LINK_NAMES[:65]})


@pytest.mark.parametrize("key", LINK_KEYS)
def test_link_lists_are_stored_sorted(key: str) -> None:
    rec = record(**{key: ["lead:b", "finding:z", "lead:a", "a:9"]})
    assert getattr(rec, key) == ("a:9", "finding:z", "lead:a", "lead:b")
    assert rec.content()[key] == ["a:9", "finding:z", "lead:a", "lead:b"]


@pytest.mark.parametrize("key", LINK_KEYS)
def test_link_list_naming_a_record_twice_is_refused(key: str) -> None:
    assert_refused({"name": "lead:x", "text": "", key: ["lead:a", "lead:b", "lead:a"]})


@pytest.mark.parametrize("key", LINK_KEYS)
def test_link_list_naming_the_record_itself_is_refused(key: str) -> None:
    assert_refused({"name": "lead:x", "text": "", key: ["lead:a", "lead:x"]})


@pytest.mark.parametrize("key", LINK_KEYS)
@pytest.mark.parametrize("bad", ["Lead:a", "lead", "", None, 1, ["lead:a"]])
def test_link_list_with_an_invalid_name_is_refused(key: str, bad: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", key: ["lead:a", bad]})


@pytest.mark.parametrize("key", LINK_KEYS)
@pytest.mark.parametrize("bad", ["lead:a", {"lead:a": 1}, 1, True, ("lead:a",)])
def test_link_list_must_be_a_list(key: str, bad: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", key: bad})


def test_links_may_name_records_that_do_not_exist() -> None:
    assert record(depends_on=["paper:not-written-yet"]).depends_on == ("paper:not-written-yet",)


# --- what a caller may not write ------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    ["author", "written_at", "version", "digest", "origin", "revision", "anything", "", "Name", 1],
)
def test_unknown_keys_are_refused(key: Any) -> None:
    assert_refused({"name": "lead:x", "text": "", key: "x"})


@pytest.mark.parametrize("value", [None, "lead:x", ["lead:x", "t"], 1, (("name", "lead:x"),)])
def test_record_must_be_an_object(value: Any) -> None:
    assert_refused(value)


# --- content and digest ---------------------------------------------------------------------


def test_content_is_exactly_the_seven_keys_with_defaults() -> None:
    assert record().content() == {
        "name": "lead:reef-survey-2016",
        "kind": "lead",
        "text": "methods missing",
        "fields": {},
        "depends_on": [],
        "supports": [],
        "contradicts": [],
    }
    assert tuple(record().content()) == CONTENT_KEYS


def test_digest_of_a_known_record() -> None:
    canonical = (
        '{"contradicts":[],"depends_on":[],"fields":{},"kind":"lead",'
        '"name":"lead:reef-survey-2016","supports":[],"text":"methods missing"}'
    )
    assert record().canonical() == canonical
    assert record().digest == hashlib.sha256(canonical.encode()).hexdigest()


@PROPERTY
@given(record_inputs())
def test_digest_is_sha256_of_rfc8785_of_the_seven_keys(value: dict[str, Any]) -> None:
    seven = {
        "name": value["name"],
        "kind": value["name"].split(":")[0],
        "text": value["text"],
        "fields": value.get("fields", {}),
        **{key: sorted(value.get(key, [])) for key in LINK_KEYS},
    }
    expected = hashlib.sha256(rfc8785.dumps(seven)).hexdigest()
    rec = Record.parse(value)
    assert rec.digest == expected
    assert set(rec.content()) == set(CONTENT_KEYS)


@PROPERTY
@given(record_inputs())
def test_parsing_a_records_content_round_trips_to_the_same_digest(value: dict[str, Any]) -> None:
    rec = Record.parse(value)
    again = Record.parse(rec.content())
    assert again.digest == rec.digest
    assert again.content() == rec.content()


@PROPERTY
@given(record_inputs(), st.randoms(use_true_random=False))
def test_same_content_in_another_order_has_the_same_digest(value: dict[str, Any], rng: Any) -> None:
    reordered = dict(reversed(list(value.items())))
    for key in LINK_KEYS:
        if key in reordered:
            reordered[key] = rng.sample(reordered[key], len(reordered[key]))
    if "fields" in reordered:
        items = list(reordered["fields"].items())
        rng.shuffle(items)
        reordered["fields"] = dict(items)
    assert Record.parse(reordered).digest == Record.parse(value).digest


def test_absent_fields_and_links_digest_like_empty_ones() -> None:
    empty = record(fields={}, depends_on=[], supports=[], contradicts=[])
    assert empty.digest == record().digest


@PROPERTY
@given(record_inputs(), record_inputs())
def test_different_content_has_a_different_digest(a: dict[str, Any], b: dict[str, Any]) -> None:
    first, second = Record.parse(a), Record.parse(b)
    if first.canonical() != second.canonical():
        assert first.digest != second.digest
    else:
        assert first.digest == second.digest


@pytest.mark.parametrize(
    "change",
    [
        {"name": "lead:reef-survey-2017"},
        {"name": "note:reef-survey-2016"},
        {"text": "methods missing."},
        {"fields": {"year": 2016}},
        {"fields": {"year": "2016"}},
        {"depends_on": ["paper:a"]},
        {"supports": ["paper:a"]},
        {"contradicts": ["paper:a"]},
    ],
)
def test_any_change_of_content_changes_the_digest(change: dict[str, Any]) -> None:
    assert record(**change).digest != record().digest


# Regression: a record owns its fields; later changes to the caller's objects do not leak in.
def test_record_content_does_not_change_when_the_callers_objects_do() -> None:
    fields: dict[str, Any] = {"years": [2014]}
    rec = record(fields=fields)
    digest = rec.digest
    fields["years"].append(2016)
    fields["bad"] = math.nan
    rec.content()["fields"]["years"].append(2020)
    assert rec.digest == digest
    assert rec.content()["fields"] == {"years": [2014]}


# --- stored records -------------------------------------------------------------------------


@PROPERTY
@given(record_inputs().filter(lambda v: not _has_large_integral_float(v.get("fields"))))
def test_verified_content_returns_the_seven_keys_as_digested(value: dict[str, Any]) -> None:
    rec = Record.parse(value)
    content = stored(rec).verified_content()
    assert content == rec.content()
    assert sha256_hex(canonical_text(content)) == rec.digest


def _has_large_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer() and abs(value) > MAX_SAFE_INTEGER and abs(value) < 1e21
    if isinstance(value, dict):
        return any(_has_large_integral_float(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_large_integral_float(item) for item in value)
    return False


# Regression: a record with fields {"x": 1e20} is stored as plain digits and reads back.
@PROPERTY
@given(record_inputs())
@example({"name": "lead:x", "text": "", "fields": {"x": 1e20}})
@example({"name": "lead:x", "text": "", "fields": {"x": 2.0**53}})
def test_every_accepted_record_verifies_once_stored(value: dict[str, Any]) -> None:
    rec = Record.parse(value)
    assert stored(rec).verified_content() == Record.parse(rec.content()).content()


def test_verified_content_refuses_tampered_content() -> None:
    rec = record(text="dataset ends 2014")
    tampered = rec.canonical().replace("2014", "2019")
    with pytest.raises(IntegrityError) as info:
        stored(rec, content=tampered).verified_content()
    assert info.value.code == "integrity"


@pytest.mark.parametrize(
    "digest", ["0" * 64, "", "not-a-digest", "TAMPERED", sha256_hex("{}")], ids=repr
)
def test_verified_content_refuses_a_tampered_digest(digest: str) -> None:
    with pytest.raises(IntegrityError):
        stored(record(), digest=digest).verified_content()


def test_verified_content_refuses_an_upper_case_digest() -> None:
    with pytest.raises(IntegrityError):
        stored(record(), digest=record().digest.upper()).verified_content()


def test_verified_content_refuses_non_canonical_content_even_with_its_own_digest() -> None:
    loose = json.dumps(record().content(), indent=1)
    assert loose != record().canonical()
    with pytest.raises(IntegrityError):
        stored(record(), content=loose, digest=sha256_hex(loose)).verified_content()


def _plain(**keys: Any) -> str:
    """A note's text in the one spelling the plain-record pattern accepts, whatever it says."""
    value = {"contradicts": [], "depends_on": [], "fields": {}, "kind": "lead"}
    value |= {"name": "lead:reef-survey-2016", "supports": [], "text": "methods missing"} | keys
    return canonical_text(value)


# A text in the plain spelling is read without writing it out again, so validity is what parsing
# it as a record decides: each of these is canonical JSON, but not a record Oh could have written.
@pytest.mark.parametrize(
    "content",
    [
        _plain(depends_on=["lead:b", "lead:a"]),  # links out of order
        _plain(depends_on=["lead:a", "lead:a"]),  # a link twice
        _plain(supports=["lead:reef-survey-2016"]),  # a link to itself
        _plain(kind="finding"),  # a kind that is not the name's
        _plain(name="Lead:reef-survey-2016"),  # not a name
        _plain(text="x" * (MAX_TEXT + 1)),
        _plain(contradicts=[f"lead:n{i:03d}" for i in range(MAX_LINKS + 1)]),
    ],
    ids=["unsorted", "repeated", "self", "kind", "name", "text", "links"],
)
def test_verified_content_refuses_plain_text_that_is_not_a_valid_record(content: str) -> None:
    assert PLAIN_RECORD.fullmatch(content) is not None
    damaged = stored(record(), content=content, digest=sha256_hex(content))
    with pytest.raises(IntegrityError):
        damaged.verified_content()


# The shortcut for plain notes decides as the definition does: content is accepted exactly when it
# matches its digest, parses as a valid record of its name and is that record's canonical form.
@PROPERTY
@given(record_inputs(), st.data())
def test_the_plain_note_shortcut_decides_as_the_full_check(
    value: dict[str, Any], data: Any
) -> None:
    rec = Record.parse({**value, "fields": {}})
    text = rec.canonical()
    cut = data.draw(st.integers(0, len(text)))
    edit = data.draw(st.sampled_from(["", " ", ",", '"', "]", "[", "lead:a", "\\u0041", "}"]))
    content = text[:cut] + edit + text[cut + data.draw(st.integers(0, 3)) :]
    try:
        parsed = parse_json(content, "x")
        expected = Record.parse(parsed).canonical() == content and parsed["name"] == rec.name
    except (InvalidArgument, KeyError, TypeError):
        expected = False
    candidate = stored(rec, content=content, digest=sha256_hex(content))
    try:
        candidate.verified_content()
        accepted = True
    except IntegrityError:
        accepted = False
    assert accepted == expected


# Regression: the same bytes kept as a BLOB match the digest, but a record is text.
def test_verified_content_refuses_content_kept_as_bytes() -> None:
    rec = record()
    damaged = stored(rec, content=rec.canonical().encode())
    with pytest.raises(IntegrityError):
        damaged.verified_content()


def test_verified_content_refuses_content_of_another_name() -> None:
    other = record(name="lead:other")
    with pytest.raises(IntegrityError):
        stored(record(), content=other.canonical(), digest=other.digest).verified_content()


def test_a_digest_verified_once_still_refuses_other_content_under_it() -> None:
    rec = record(text="verified once, then damaged")
    assert stored(rec).verified_content()["text"] == "verified once, then damaged"
    damaged = rec.canonical().replace("damaged", "repaired")
    with pytest.raises(IntegrityError, match="does not match its digest"):
        stored(rec, content=damaged).verified_content()
    assert stored(rec).verified_content()["text"] == "verified once, then damaged"


def test_a_digest_verified_once_still_refuses_the_row_of_another_name() -> None:
    other = record(name="lead:verified-elsewhere")
    assert stored(other).verified_content()["name"] == "lead:verified-elsewhere"
    with pytest.raises(IntegrityError, match="another record's content"):
        stored(record(), content=other.canonical(), digest=other.digest).verified_content()


@pytest.mark.parametrize("fields", [{}, {"site": {"depth_m": [3, 9]}}], ids=["flat", "fields"])
def test_every_read_of_a_digest_gets_its_own_value(fields: dict[str, Any]) -> None:
    rec = record(text="read twice", fields=fields, depends_on=["lead:a"], supports=["lead:b"])
    first = stored(rec).verified_content()
    expected = rec.content()
    assert first == expected
    first["text"] = "changed by a caller"
    first["fields"]["added"] = True
    for key in ("depends_on", "supports", "contradicts"):
        first[key].append("lead:z")
    if fields:
        first["fields"]["site"]["depth_m"].append(40)
    assert stored(rec).verified_content() == expected
    assert list(stored(rec).verified_content()) == list(json.loads(rec.canonical()))  # its order


def test_the_verified_digests_held_are_bounded_by_their_size(monkeypatch: Any) -> None:
    from oh.core import records

    monkeypatch.setattr(records, "_VERIFIED", {})
    monkeypatch.setattr(records, "_verified_characters", 0)
    monkeypatch.setattr(records, "_VERIFIED_CHARACTERS", 4000)
    recs = [record(text=f"note {i} " + "x" * 300) for i in range(40)]
    for _ in range(2):
        for rec in recs:
            assert stored(rec).verified_content() == rec.content()
            held = sum(2 * len(content) for content, _ in records._VERIFIED.values())
            assert held == records._verified_characters <= 4000
    assert 1 < len(records._VERIFIED) < len(recs)
    assert list(records._VERIFIED)[-1] == recs[-1].digest  # the oldest are dropped first


# Regression: stored content that is canonical JSON but not a valid record is an
# integrity error, never a crash or a 400.
@pytest.mark.parametrize(
    "content",
    [
        "[1]",
        "null",
        '"lead:a"',
        "not json",
        '{"name":"lead:a"}',
        '{"contradicts":[],"depends_on":[],"fields":{},"kind":"finding","name":"lead:a",'
        '"supports":[],"text":""}',
        '{"author":"x","contradicts":[],"depends_on":[],"fields":{},"kind":"lead",'
        '"name":"lead:a","supports":[],"text":""}',
    ],
)
def test_verified_content_refuses_damaged_content_that_is_not_a_record(content: str) -> None:
    damaged = StoredRecord(
        name="lead:a",
        kind="lead",
        content=content,
        digest=sha256_hex(content),
        author="agent:run-1",
        written_at="2024-05-01T12:00:00Z",
        version=1,
    )
    with pytest.raises(IntegrityError):
        damaged.verified_content()


# --- no input, however malformed, raises anything but InvalidArgument ------------------------

_junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(),
    st.text(max_size=6),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    st.binary(max_size=4),
    st.complex_numbers(),
    st.builds(object),
    st.frozensets(st.integers(), max_size=2),
    names,
    st.sampled_from(["lead", "add", "x" * 5000, "\U0001f600" * 4001]),
)
_junk_keys = st.one_of(
    st.sampled_from([*CONTENT_KEYS, "author", "version", "digest"]),
    st.text(max_size=4),
    st.integers(),
    st.none(),
    st.floats(),
)
junk = st.recursive(
    _junk_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.dictionaries(_junk_keys, inner, max_size=4),
        st.sets(st.integers(), max_size=2),
    ),
    max_leaves=15,
)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


_link_junk = st.one_of(
    junk,
    st.lists(st.one_of(names, junk), max_size=5),
    st.integers(MAX_LINKS - 2, MAX_LINKS + 2).map(lambda n: [f"lead:n{i}" for i in range(n)]),
    st.just(["lead:a"] * 100),
)
hostile_records = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(names, junk),
            "kind": st.one_of(st.sampled_from(["lead", "finding"]), junk),
            "text": st.one_of(texts, junk),
            "fields": st.one_of(
                fields_objects,
                junk,
                st.dictionaries(_junk_keys, junk, max_size=4),
                st.integers(30, 3000).map(lambda d: {"deep": _nested(d)}),
                st.just({"big": "x" * (2 * MAX_FIELDS_BYTES)}),
            ),
            "depends_on": _link_junk,
            "supports": _link_junk,
            "contradicts": _link_junk,
            "author": junk,
        },
    ),
)


@FUZZ
@given(hostile_records)
def test_record_parse_only_ever_raises_invalid_argument(value: Any) -> None:
    try:
        rec = Record.parse(value)
    except InvalidArgument as exc:
        refusal = exc
    else:
        assert Record.parse(rec.content()).digest == rec.digest
        return
    assert refusal.code == "invalid_argument"


def test_the_revision_chain_says_what_each_entry_breaks() -> None:

    from oh.core.changes import Break
    from oh.core.reviewed import RevisionChain, knowledge_genesis, pack_revision

    def pack(revision: int, prev: str, owner: str = "ann") -> Any:
        made = "2026-01-01T00:00:00.000000Z"
        return pack_revision(
            owner, revision, "research", "d" * 64, made_by="ann", made_at=made, prev_hash=prev
        )

    first = pack(1, knowledge_genesis("ann"))
    second = pack(2, first.hash)
    chain = RevisionChain("ann")
    assert [chain.follow(first), chain.follow(second)] == [None, None]
    assert (chain.revision, chain.head) == (2, second.hash)
    # Out of place, detached, altered, and another owner's entry, each said as such.
    chain = RevisionChain("ann")
    assert chain.follow(second) == Break(1, True, True, False)
    chain = RevisionChain("ann")
    chain.follow(first)
    assert chain.follow(dataclasses.replace(second, name="other")) == Break(2, False, False, True)
    chain = RevisionChain("ann")
    assert chain.follow(pack(1, knowledge_genesis("bob"), "bob")) == Break(1, True, True, False)
