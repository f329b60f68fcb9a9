"""Write semantics (SPEC §2, §11): the remember payload, its fingerprint, the results, the
hash-chained log entry, following its chain, and folding the log into the current records."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oh.core.canonical import MAX_SAFE_INTEGER
from oh.core.changes import (
    MAX_CHANGES,
    Add,
    Applied,
    Break,
    LogChain,
    LogEntry,
    LoggedChange,
    Refused,
    Remove,
    Replace,
    check_against,
    entry_hash,
    fingerprint,
    fold,
    genesis_hash,
    log_changes,
    parse_based_on,
    parse_changes,
    parse_request_id,
    replay,
)
from oh.core.records import Record, StoredRecord
from oh.errors import AlreadyExists, InvalidArgument, NotFound, TooManyChanges

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LINK_KEYS = ("depends_on", "supports", "contradicts")
NOTEBOOK = "nb-1"
AUTHOR = "agent:run-1"


def record_json(name: str, text: str = "a note", **more: Any) -> dict[str, Any]:
    return {"name": name, "text": text, **more}


def add(name: str, text: str = "a note", **more: Any) -> dict[str, Any]:
    return {"op": "add", "record": record_json(name, text, **more)}


def replace(name: str, text: str = "a note", **more: Any) -> dict[str, Any]:
    return {"op": "replace", "record": record_json(name, text, **more)}


def remove(name: str) -> dict[str, Any]:
    return {"op": "remove", "name": name}


def many(count: int) -> list[dict[str, Any]]:
    return [add(f"lead:n{i}") for i in range(count)]


def assert_invalid(value: Any) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        parse_changes(value)
    assert type(info.value) is InvalidArgument
    assert info.value.code == "invalid_argument"
    return info.value


def make_entry(
    version: int, raw_changes: list[dict[str, Any]], prev_hash: str, **stamps: Any
) -> LogEntry:
    changes = parse_changes(raw_changes)
    logged = log_changes(changes)
    args: dict[str, Any] = {
        "notebook_id": NOTEBOOK,
        "version": version,
        "request_id": f"r-{version}",
        "fingerprint": fingerprint(version - 1, changes),
        "author": AUTHOR,
        "written_at": f"2024-05-01T12:{version % 60:02d}:00Z",
        "changes": logged,
        "prev_hash": prev_hash,
        **stamps,
    }
    return LogEntry(**args, hash=entry_hash(**args))


# --- the changes list -----------------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 2, MAX_CHANGES])
def test_changes_hold_1_to_64_operations(count: int) -> None:
    assert MAX_CHANGES == 64
    assert len(parse_changes(many(count))) == count


def test_no_changes_is_invalid_argument() -> None:
    assert_invalid([])


@pytest.mark.parametrize("count", [MAX_CHANGES + 1, 1000])
def test_more_than_64_changes_is_too_many_changes(count: int) -> None:
    with pytest.raises(TooManyChanges) as info:
        parse_changes(many(count))
    assert info.value.code == "too_many_changes"
    assert isinstance(info.value, InvalidArgument)
    assert info.value.http_status == 400
    assert info.value.to_json()["error"]["code"] == "too_many_changes"


@pytest.mark.parametrize("value", [None, {}, "add", 1, (add("lead:a"),), {"0": add("lead:a")}])
def test_changes_must_be_a_list(value: Any) -> None:
    assert_invalid(value)


@pytest.mark.parametrize("change", [None, "add", 1, ["add", {"name": "lead:a"}], []])
def test_each_change_must_be_an_object(change: Any) -> None:
    assert_invalid([add("lead:ok"), change])


def test_parse_changes_keeps_each_operation_in_order() -> None:
    changes = parse_changes([add("lead:a"), replace("lead:b"), remove("lead:c")])
    assert [type(c) for c in changes] == [Add, Replace, Remove]
    assert [(c.op, c.name) for c in changes] == [
        ("add", "lead:a"),
        ("replace", "lead:b"),
        ("remove", "lead:c"),
    ]
    assert changes[0] == Add(Record.parse(record_json("lead:a")))


@pytest.mark.parametrize(
    "change",
    [
        {**add("lead:a"), "name": "lead:a"},
        {**add("lead:a"), "request_id": "r-1"},
        {**add("lead:a"), "author": "someone"},
        {**replace("lead:a"), "based_on": 7},
        {**remove("lead:a"), "record": record_json("lead:a")},
        {**remove("lead:a"), "reason": "stale"},
        {"op": "add"},
        {"op": "replace", "name": "lead:a"},
        {"op": "remove"},
        {"op": "remove", "record": record_json("lead:a")},
    ],
)
def test_unknown_or_missing_keys_in_a_change_are_refused(change: dict[str, Any]) -> None:
    assert_invalid([change])


@pytest.mark.parametrize(
    "op", ["ADD", "Add", "delete", "update", "upsert", "", " add", None, 1, True, ["add"], {}]
)
def test_bad_op_is_refused(op: Any) -> None:
    assert_invalid([{"op": op, "record": record_json("lead:a")}])
    assert_invalid([{"op": op, "name": "lead:a"}])


def test_missing_op_is_refused() -> None:
    assert_invalid([{"record": record_json("lead:a")}])


@pytest.mark.parametrize("name", ["Lead:a", "lead", "", None, 1, ["lead:a"], "lead:a "])
def test_remove_needs_a_valid_name(name: Any) -> None:
    assert_invalid([{"op": "remove", "name": name}])


@pytest.mark.parametrize(
    "bad_record",
    [
        None,
        "lead:a",
        record_json("lead:a", author="me"),
        record_json("lead:a", "x" * 4001),
        record_json("lead:a", depends_on=["lead:a"]),
        {"text": "no name"},
    ],
)
@pytest.mark.parametrize("op", ["add", "replace"])
def test_a_record_in_a_change_follows_the_record_rules(op: str, bad_record: Any) -> None:
    assert_invalid([{"op": op, "record": bad_record}])


@pytest.mark.parametrize(
    "changes",
    [
        [add("lead:a"), add("lead:a", "other text")],
        [add("lead:a"), replace("lead:a")],
        [replace("lead:a"), remove("lead:a")],
        [remove("lead:a"), remove("lead:a")],
        [add("lead:a"), add("lead:b"), remove("lead:a")],
    ],
)
def test_one_name_at_most_once_per_call(changes: list[dict[str, Any]]) -> None:
    assert_invalid(changes)


# --- based_on and request_id ----------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 7, MAX_SAFE_INTEGER])
def test_based_on_is_a_non_negative_integer(value: int) -> None:
    assert parse_based_on(value) == value


@pytest.mark.parametrize("value", [-1, True, False, 7.0, "7", None, [7]])
def test_based_on_of_another_kind_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgument):
        parse_based_on(value)


@pytest.mark.parametrize("value", ["r-12", "x", "x" * 128, "é \U0001f600"])
def test_request_id_is_printable_text_of_1_to_128_characters(value: str) -> None:
    assert parse_request_id(value) == value


@pytest.mark.parametrize("value", ["", "x" * 129, "a\nb", "\x00", "tab\t", 12, None, b"r-1"])
def test_request_id_of_another_kind_is_refused(value: Any) -> None:
    with pytest.raises(InvalidArgument):
        parse_request_id(value)


# --- fingerprint ----------------------------------------------------------------------------

# Few kinds and short slugs, so that names collide across changes and writes.
short_names = st.builds(
    "{}:{}{}".format,
    st.sampled_from(["lead", "finding", "k_9"]),
    st.sampled_from("ab09"),
    st.text("ab9._-", max_size=3),
)
texts = st.text(max_size=20)
field_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=8,
)
fields_objects = st.dictionaries(texts, field_values, max_size=4)


@st.composite
def change_lists(draw: st.DrawFn, max_size: int = 5) -> list[dict[str, Any]]:
    """A valid ``changes`` list with every optional key present."""
    names = draw(st.lists(short_names, min_size=1, max_size=max_size, unique=True))
    changes: list[dict[str, Any]] = []
    for name in names:
        op = draw(st.sampled_from(["add", "replace", "remove"]))
        if op == "remove":
            changes.append(remove(name))
            continue
        others = st.lists(short_names.filter(lambda n, own=name: n != own), max_size=3, unique=True)
        rec = record_json(name, draw(texts), fields=draw(fields_objects))
        rec.update({key: draw(others) for key in LINK_KEYS})
        changes.append({"op": op, "record": rec})
    return changes


def _reordered(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _reordered(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_reordered(item, rng) for item in value]
    return value


def same_meaning(changes: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The same write spelled differently: keys in another order, link lists shuffled, empty
    ``fields`` and link lists dropped or kept, ``kind`` given or not."""
    result = []
    for change in changes:
        if change["op"] == "remove":
            result.append(dict(reversed(list(change.items()))))
            continue
        rec = dict(change["record"])
        for key in LINK_KEYS:
            rng.shuffle(rec[key])
            if not rec[key] and rng.random() < 0.5:
                del rec[key]
        if not rec["fields"] and rng.random() < 0.5:
            del rec["fields"]
        if rng.random() < 0.5:
            rec["kind"] = rec["name"].split(":")[0]
        result.append({"record": _reordered(rec, rng), "op": change["op"]})
    return result


@PROPERTY
@given(st.integers(0, MAX_SAFE_INTEGER), change_lists(), st.randoms(use_true_random=False))
def test_fingerprint_is_equal_for_payloads_that_mean_the_same_write(
    based_on: int, changes: list[dict[str, Any]], rng: random.Random
) -> None:
    other = same_meaning(json.loads(json.dumps(changes)), rng)
    assert fingerprint(based_on, parse_changes(other)) == fingerprint(
        based_on, parse_changes(changes)
    )


def test_fingerprint_of_absent_fields_equals_empty_fields() -> None:
    assert fingerprint(7, parse_changes([add("lead:a")])) == fingerprint(
        7,
        parse_changes([add("lead:a", fields={}, depends_on=[], supports=[], contradicts=[])]),
    )


def test_fingerprint_is_sha256_of_the_canonical_retry_payload() -> None:
    changes = parse_changes([add("lead:a", supports=["lead:z", "lead:b"]), remove("lead:c")])
    payload = {
        "based_on": 7,
        "changes": [
            {
                "op": "add",
                "record": {
                    "name": "lead:a",
                    "kind": "lead",
                    "text": "a note",
                    "fields": {},
                    "depends_on": [],
                    "supports": ["lead:b", "lead:z"],
                    "contradicts": [],
                },
            },
            {"op": "remove", "name": "lead:c"},
        ],
    }
    assert fingerprint(7, changes) == hashlib.sha256(rfc8785.dumps(payload)).hexdigest()


@PROPERTY
@given(st.integers(0, MAX_SAFE_INTEGER - 1), change_lists())
def test_fingerprint_differs_for_a_different_based_on(
    based_on: int, changes: list[dict[str, Any]]
) -> None:
    parsed = parse_changes(changes)
    assert fingerprint(based_on, parsed) != fingerprint(based_on + 1, parsed)


@pytest.mark.parametrize(
    "other",
    [
        [add("lead:a", "another text")],
        [replace("lead:a")],
        [add("lead:b")],
        [add("lead:a", fields={"x": 1})],
        [add("lead:a", depends_on=["lead:b"])],
        [add("lead:a", supports=["lead:b"])],
        [add("lead:a", contradicts=["lead:b"])],
        [add("lead:a"), add("lead:b")],
        [remove("lead:a")],
    ],
)
def test_fingerprint_differs_for_different_content(other: list[dict[str, Any]]) -> None:
    assert fingerprint(7, parse_changes(other)) != fingerprint(7, parse_changes([add("lead:a")]))


@PROPERTY
@given(change_lists(), change_lists())
def test_fingerprint_differs_whenever_the_normalized_changes_differ(
    first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> None:
    a, b = parse_changes(first), parse_changes(second)
    assert (fingerprint(3, a) == fingerprint(3, b)) == (log_changes(a) == log_changes(b))


# --- results (SPEC §11) ---------------------------------------------------------------------


def test_applied_result_has_exactly_the_spec_shape() -> None:
    result = Applied(8, (("lead:a", "ab" * 32), ("lead:b", None)))
    assert result.to_json() == {
        "status": "applied",
        "version": 8,
        "written": [{"name": "lead:a", "digest": "ab" * 32}, {"name": "lead:b", "digest": None}],
    }
    assert json.loads(json.dumps(result.to_json())) == result.to_json()


def test_a_remove_is_written_with_a_null_digest() -> None:
    rec = Record.parse(record_json("lead:a"))
    entry = make_entry(8, [add("lead:a"), remove("lead:gone")], genesis_hash(NOTEBOOK))
    assert entry.result().to_json() == {
        "status": "applied",
        "version": 8,
        "written": [
            {"name": "lead:a", "digest": rec.digest},
            {"name": "lead:gone", "digest": None},
        ],
    }


def test_refused_result_has_exactly_the_spec_shape() -> None:
    assert Refused(9).to_json() == {"status": "refused", "reason": "stale", "current_version": 9}


def test_the_entry_result_is_what_every_identical_retry_returns() -> None:
    entry = make_entry(3, [add("lead:a"), replace("lead:b")], genesis_hash(NOTEBOOK))
    assert entry.result() == entry.result()
    assert entry.result().version == 3
    assert [name for name, _ in entry.result().written] == ["lead:a", "lead:b"]


# --- the log entry and its hash chain -------------------------------------------------------


def test_log_changes_carry_the_canonical_content_and_digest() -> None:
    rec = Record.parse(record_json("lead:a", supports=["lead:c", "lead:b"]))
    logged = log_changes(parse_changes([add("lead:a", supports=["lead:c", "lead:b"])]))
    assert logged == (LoggedChange("add", "lead:a", rec.canonical(), rec.digest),)
    assert log_changes(parse_changes([remove("lead:a")])) == (
        LoggedChange("remove", "lead:a", None, None),
    )


def test_genesis_hash_binds_the_chain_to_its_notebook() -> None:
    expected = hashlib.sha256(b"oh/log/genesis\nnb-1").hexdigest()
    assert genesis_hash("nb-1") == expected
    assert genesis_hash("nb-2") != expected


ENTRY_ARGS: dict[str, Any] = {
    "notebook_id": NOTEBOOK,
    "version": 8,
    "request_id": "r-12",
    "fingerprint": "f" * 64,
    "author": AUTHOR,
    "written_at": "2024-05-01T12:00:00Z",
    "changes": (
        LoggedChange("add", "lead:a", "{}", "a" * 64),
        LoggedChange("remove", "lead:b", None, None),
    ),
    "prev_hash": "0" * 64,
}


def test_entry_hash_is_deterministic() -> None:
    assert entry_hash(**ENTRY_ARGS) == entry_hash(**dict(ENTRY_ARGS))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("notebook_id", "nb-2"),
        ("version", 9),
        ("request_id", "r-13"),
        ("fingerprint", "e" * 64),
        ("author", "agent:run-2"),
        ("written_at", "2024-05-01T12:00:01Z"),
        ("prev_hash", "1" * 64),
        ("changes", ENTRY_ARGS["changes"][:1]),
        ("changes", ENTRY_ARGS["changes"][::-1]),
        ("changes", (LoggedChange("replace", "lead:a", "{}", "a" * 64), ENTRY_ARGS["changes"][1])),
        ("changes", (LoggedChange("add", "lead:c", "{}", "a" * 64), ENTRY_ARGS["changes"][1])),
        ("changes", (LoggedChange("add", "lead:a", "{}", "b" * 64), ENTRY_ARGS["changes"][1])),
    ],
)
def test_entry_hash_changes_when_any_field_changes(key: str, value: Any) -> None:
    assert entry_hash(**{**ENTRY_ARGS, key: value}) != entry_hash(**ENTRY_ARGS)


def test_log_entry_expected_hash_is_its_entry_hash() -> None:
    entry = LogEntry(**ENTRY_ARGS, hash=entry_hash(**ENTRY_ARGS))
    assert entry.expected_hash() == entry.hash


def test_each_entry_carries_the_hash_of_the_previous_one() -> None:
    first = make_entry(1, [add("lead:a")], genesis_hash(NOTEBOOK))
    second = make_entry(2, [remove("lead:a")], first.hash)
    assert second.prev_hash == first.hash
    assert second.expected_hash() == second.hash
    forged = make_entry(1, [add("lead:a", "forged")], genesis_hash(NOTEBOOK))
    assert forged.hash != first.hash  # rewriting history breaks every later prev_hash


# --- fold -----------------------------------------------------------------------------------


def test_fold_add_stores_the_record_with_the_entry_stamps() -> None:
    state: dict[str, StoredRecord] = {}
    entry = make_entry(1, [add("lead:a", "first", supports=["lead:z"])], genesis_hash(NOTEBOOK))
    fold(state, [entry], StoredRecord)
    rec = Record.parse(record_json("lead:a", "first", supports=["lead:z"]))
    assert state == {
        "lead:a": StoredRecord(
            name="lead:a",
            kind="lead",
            content=rec.canonical(),
            digest=rec.digest,
            author=entry.author,
            written_at=entry.written_at,
            version=1,
        )
    }
    assert state["lead:a"].verified_content() == rec.content()


def test_fold_replace_gives_the_name_new_content_and_stamps() -> None:
    state: dict[str, StoredRecord] = {}
    first = make_entry(1, [add("lead:a", "first"), add("lead:b")], genesis_hash(NOTEBOOK))
    second = make_entry(2, [replace("lead:a", "second")], first.hash, author="agent:run-2")
    fold(state, [first], StoredRecord)
    fold(state, [second], StoredRecord)
    assert state["lead:a"].verified_content()["text"] == "second"
    assert (state["lead:a"].version, state["lead:a"].author) == (2, "agent:run-2")
    assert state["lead:b"].version == 1


def test_fold_remove_deletes_the_name() -> None:
    state: dict[str, StoredRecord] = {}
    first = make_entry(1, [add("lead:a"), add("lead:b")], genesis_hash(NOTEBOOK))
    fold(state, [first], StoredRecord)
    fold(state, [make_entry(2, [remove("lead:a")], first.hash)], StoredRecord)
    assert set(state) == {"lead:b"}


@PROPERTY
@given(st.lists(change_lists(max_size=4), min_size=1, max_size=6))
def test_replaying_the_log_rebuilds_the_current_records(writes: list[list[dict[str, Any]]]) -> None:
    state: dict[str, StoredRecord] = {}
    model: dict[str, dict[str, Any]] = {}
    prev, version = genesis_hash(NOTEBOOK), 0
    log = []
    for raw in writes:
        changes = parse_changes(raw)
        try:
            check_against(changes, model)
        except (AlreadyExists, NotFound):
            continue  # a refused write leaves no trace
        version += 1
        entry = make_entry(version, raw, prev)
        prev = entry.hash
        log.append(entry)
        fold(state, [entry], StoredRecord)
        for change in changes:
            if isinstance(change, Remove):
                del model[change.name]
            else:
                model[change.name] = change.record.content()
    assert {name: stored.verified_content() for name, stored in state.items()} == model
    assert replay(log) == state
    chain = LogChain(NOTEBOOK)
    assert [chain.follow(entry) for entry in log] == [None] * len(log)
    assert (chain.version, chain.head) == (version, prev)


def test_fold_keeps_what_the_caller_makes_of_each_write_and_drops_a_none() -> None:
    first = make_entry(1, [add("lead:a"), add("lead:b"), add("lead:c")], genesis_hash(NOTEBOOK))
    second = make_entry(2, [remove("lead:a"), replace("lead:b", "lost")], first.hash)
    seen: list[tuple[Any, ...]] = []

    def kept(*change: Any) -> str | None:
        seen.append(change)
        name, kind, content = change[:3]
        assert kind == name.partition(":")[0]
        return None if "lost" in str(content) else f"{name}@{change[6]}"

    state: dict[str, str] = {"lead:z": "left alone"}
    fold(state, [first, second], kept)
    assert state == {"lead:c": "lead:c@1", "lead:z": "left alone"}
    # Every write, with its entry's stamps; a remove is never shown to the caller.
    assert [(c[0], c[4], c[5], c[6]) for c in seen] == [
        ("lead:a", AUTHOR, first.written_at, 1),
        ("lead:b", AUTHOR, first.written_at, 1),
        ("lead:c", AUTHOR, first.written_at, 1),
        ("lead:b", AUTHOR, second.written_at, 2),
    ]
    assert seen[0][2:4] == (first.changes[0].content, first.changes[0].digest)


def test_fold_sets_a_name_written_twice_in_one_entry_to_its_last_write() -> None:
    # No remember call can write a name twice; a damaged log can, and the last write wins.
    entry = make_entry(1, [add("lead:a", "one")], genesis_hash(NOTEBOOK))
    twice = entry._replace(changes=(*entry.changes, entry.changes[0]._replace(digest="d2")))
    state: dict[str, StoredRecord] = {}
    fold(state, [twice], StoredRecord)
    assert state["lead:a"].digest == "d2"


# --- the chain ------------------------------------------------------------------------------


def chained(count: int) -> list[LogEntry]:
    log, prev = [], genesis_hash(NOTEBOOK)
    for version in range(1, count + 1):
        log.append(make_entry(version, [add(f"lead:n{version}")], prev))
        prev = log[-1].hash
    return log


def test_a_chain_from_genesis_breaks_nowhere_and_ends_at_the_last_entry() -> None:
    log = chained(3)
    chain = LogChain(NOTEBOOK)
    assert (chain.version, chain.head) == (0, genesis_hash(NOTEBOOK))
    assert [chain.follow(entry) for entry in log] == [None, None, None]
    assert (chain.version, chain.head) == (3, log[-1].hash)


def test_a_first_entry_chained_to_another_notebook_is_detached() -> None:
    (entry,) = chained(1)
    assert LogChain("nb-2").follow(entry) == Break(1, False, True, False)


def test_a_gap_in_the_versions_is_one_break_and_the_chain_follows_on() -> None:
    one, _, three, four = chained(4)
    chain = LogChain(NOTEBOOK)
    # Entry 2 is missing: 3 is misplaced and does not follow 1; 4 follows 3 as usual.
    found = [chain.follow(entry) for entry in (one, three, four)]
    assert found == [None, Break(2, True, True, False), None]
    assert chain.version == 4


def test_an_entry_with_any_hashed_value_changed_is_altered() -> None:
    one, two = chained(2)
    chain = LogChain(NOTEBOOK)
    chain.follow(one)
    assert chain.follow(two._replace(author="agent:other")) == Break(2, False, False, True)
    # The entry after an altered one is judged against the hash the altered one carries.
    three = make_entry(3, [add("lead:n3")], two.hash)
    assert chain.follow(three) is None


def test_a_stored_value_of_the_wrong_type_is_altered_not_raised() -> None:
    (entry,) = chained(1)
    damaged = entry._replace(changes=(entry.changes[0]._replace(digest=7),))
    assert LogChain(NOTEBOOK).follow(damaged) == Break(1, False, False, True)
    renumbered = entry._replace(version="1")
    assert LogChain(NOTEBOOK).follow(renumbered) == Break(1, True, False, True)


# --- check_against --------------------------------------------------------------------------


def test_add_of_an_existing_name_is_already_exists() -> None:
    with pytest.raises(AlreadyExists) as info:
        check_against(parse_changes([add("lead:b"), add("lead:a")]), {"lead:a"})
    assert info.value.code == "already_exists"
    assert info.value.details == {"name": "lead:a"}


@pytest.mark.parametrize("change", [replace("lead:missing"), remove("lead:missing")])
def test_replace_or_remove_of_a_missing_name_is_not_found(change: dict[str, Any]) -> None:
    with pytest.raises(NotFound) as info:
        check_against(parse_changes([change]), {"lead:a"})
    assert info.value.code == "not_found"
    assert info.value.details == {"name": "lead:missing"}


def test_valid_changes_pass_the_check() -> None:
    changes = parse_changes([add("lead:new"), replace("lead:a"), remove("lead:b")])
    check_against(changes, ["lead:a", "lead:b"])
    check_against(changes, iter(["lead:a", "lead:b"]))


# --- no input, however malformed, raises anything but InvalidArgument ------------------------


def _nested(depth: int) -> Any:
    value: Any = 0
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


_junk_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**80), 2**80),
    st.floats(),
    st.text(max_size=6),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2),
    st.binary(max_size=4),
    st.builds(object),
    short_names,
    st.sampled_from(["add", "replace", "remove", "x" * 5000]),
    st.integers(30, 2000).map(_nested),
)
_junk_keys = st.one_of(
    st.sampled_from(["op", "record", "name", "text", "fields", "kind", *LINK_KEYS, "author"]),
    st.text(max_size=4),
    st.integers(),
    st.none(),
)
junk = st.recursive(
    _junk_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner),
        st.dictionaries(_junk_keys, inner, max_size=4),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=12,
)
_names_or_junk = st.one_of(short_names, junk)
hostile_records = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "name": _names_or_junk,
            "kind": st.one_of(st.just("lead"), junk),
            "text": st.one_of(texts, junk),
            "fields": st.one_of(
                fields_objects, junk, st.dictionaries(_junk_keys, junk, max_size=3)
            ),
            **{key: st.one_of(st.lists(_names_or_junk, max_size=4), junk) for key in LINK_KEYS},
            "version": junk,
        },
    ),
)
hostile_changes = st.one_of(
    junk,
    st.fixed_dictionaries(
        {},
        optional={
            "op": st.one_of(st.sampled_from(["add", "replace", "remove"]), junk),
            "record": hostile_records,
            "name": _names_or_junk,
            "request_id": junk,
        },
    ),
)
hostile_payloads = st.one_of(
    junk,
    st.lists(hostile_changes, max_size=5),
    st.lists(st.one_of(hostile_changes, change_lists(max_size=1).map(lambda c: c[0])), max_size=5),
    st.integers(MAX_CHANGES - 1, MAX_CHANGES + 2).map(many),
    st.integers(MAX_CHANGES - 1, MAX_CHANGES + 2).map(lambda n: [add("lead:a")] * n),
    st.just([{}] * 5000),
)


@FUZZ
@given(hostile_payloads)
def test_parse_changes_only_ever_raises_invalid_argument(value: Any) -> None:
    try:
        changes = parse_changes(value)
    except InvalidArgument as exc:
        refusal = exc
    else:
        assert 1 <= len(changes) <= MAX_CHANGES
        fingerprint(0, changes)
        log_changes(changes)
        return
    assert refusal.code in ("invalid_argument", "too_many_changes")
