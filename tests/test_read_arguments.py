"""The parsers' shortcuts (a lone ``read`` name, the common ``remember``) decide as the schema."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import Any

import fastjsonschema
from hypothesis import example, given
from hypothesis import strategies as st

from oh.errors import InvalidArgument
from oh.tools.schemas import ARGUMENTS, Read, parse_arguments

_SCHEMA = fastjsonschema.compile(ARGUMENTS["read"])

names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,119}", fullmatch=True),
    st.from_regex(r"[a-z][a-z0-9_]{0,31}:[a-z0-9][a-z0-9._-]{0,125}", fullmatch=True),
    st.text(max_size=40),
    st.integers(),
    st.none(),
)


def published_accepts(arguments: Any) -> bool:
    try:
        _SCHEMA(arguments)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


@given(names, st.sampled_from(["name", "nam", "NAME"]))
@example("note:a\n", "name")
@example("note:a\x00", "name")
@example("note:" + "a" * 120, "name")
@example("note:" + "a" * 121, "name")
@example("Note:a", "name")
def test_a_lone_name_is_accepted_exactly_when_the_published_schema_accepts_it(
    name: Any, key: str
) -> None:
    arguments = {key: name}
    try:
        parsed = parse_arguments("read", arguments)
    except InvalidArgument:
        assert not published_accepts(arguments)
    else:
        assert published_accepts(arguments)
        assert parsed == Read(name, None, None)


# ``remember``: a call the parser accepts is taken without running the schema when ``_whole``
# says the schema accepts it too. A valid call, then up to three edits near the rules the two
# state, on both sides of each.
_REMEMBER_SCHEMA = fastjsonschema.compile(ARGUMENTS["remember"])


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(call: dict[str, Any]) -> None:
        target: Any = call
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return edit


def _drop(path: tuple[Any, ...]) -> Callable[[dict[str, Any]], None]:
    def edit(call: dict[str, Any]) -> None:
        target: Any = call
        for step in path[:-1]:
            target = target[step]
        target.pop(path[-1], None)

    return edit


_RECORD = ("changes", 0, "record")
_EDITS = [
    *(_set(("based_on",), v) for v in (-1, 0, 2**53 - 1, 2**53, True, 5.0, None, "1")),
    *(
        _set(("request_id",), v)
        for v in ("", "r" * 200, "r" * 201, "r\u202e", "r\x00", "r\ud800", "é", "r\n", 5)
    ),
    _set(("extra",), 1),
    _drop(("based_on",)),
    _drop(("request_id",)),
    *(_set((*_RECORD, "fields"), v) for v in (None, {}, {"n": 1}, {"n": 2.0})),
    *(
        _set((*_RECORD, key), v)
        for key in ("depends_on", "supports", "contradicts")
        for v in (
            None,
            ("note:b",),
            ["note:b", "lead:x"],
            ["note:b", "note:b"],
            ["note:a"],
            ["Note:b"],
            [f"note:n{i}" for i in range(65)],
            [f"note:n{i}" for i in range(64)],
        )
    ),
    *(_set((*_RECORD, "kind"), v) for v in ("note", "lead", "Note", None)),
    *(_set((*_RECORD, "text"), v) for v in (None, "x" * 4000, "x" * 4001, "é", "\ud800", " ")),
    *(_set((*_RECORD, "name"), v) for v in ("note:a\n", "Note:a", "note:" + "a" * 121)),
    _set((*_RECORD, "author"), "me"),
    _drop((*_RECORD, "text")),
    _set(("changes", 0, "op"), "replace"),
    _set(("changes", 0, "op"), "Add"),
    _set(("changes", 0, "name"), "note:a"),
    _set(("changes", 1), {"op": "remove", "name": "note:b"}),
    _set(("changes", 1), {"op": "remove", "name": "note:a"}),
    _set(("changes", 1), {"op": "remove", "name": "note:b", "record": None}),
    _set(("changes",), []),
    _set(("changes", 0), MappingProxyType({"op": "add", "record": {"name": "note:a", "text": ""}})),
    _set(_RECORD, MappingProxyType({"name": "note:a", "text": "t"})),
    _set(("changes",), [{"op": "add", "record": {"name": "note:a", "text": "t"}}] * 2),
]


def test_every_remember_call_of_up_to_two_edits_parses_as_with_the_schema_always_run() -> None:
    pairs = [()] + [(i,) for i in range(len(_EDITS))]
    pairs += [(i, j) for i in range(len(_EDITS)) for j in range(len(_EDITS))]
    for edits in pairs:
        _check_remember(edits)


@given(st.lists(st.sampled_from(range(len(_EDITS))), min_size=3, max_size=4))
def test_a_remember_call_of_more_edits_parses_as_with_the_schema_always_run(
    edits: list[int],
) -> None:
    _check_remember(edits)


def _check_remember(edits: Sequence[int]) -> None:
    """The call made by ``edits`` parses as it did with the schema always run (the same value,
    or the same refusal), and a call taken whole is one the published schema accepts."""
    from oh.tools.remember import _whole

    arguments: dict[str, Any] = {
        "based_on": 1,
        "request_id": "r1",
        "changes": [{"op": "add", "record": {"name": "note:a", "text": "t"}}],
    }
    for index in edits:
        # An edit that does not apply to this call (its change was dropped) leaves it as it is.
        with contextlib.suppress(AttributeError, IndexError, KeyError, TypeError):
            _EDITS[index](arguments)
    expected = _outcome(lambda: _reference_remember(arguments))
    assert _outcome(lambda: parse_arguments("remember", arguments)) == expected, edits
    if expected[0] == "accepted" and _whole(arguments):
        try:
            _REMEMBER_SCHEMA(arguments)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise AssertionError(f"{edits} taken whole, refused by the schema: {exc}") from exc


def _reference_remember(arguments: Any) -> Any:
    """The parse with the schema always run, as it was before the shortcut."""
    from oh.core.changes import parse_based_on, parse_changes, parse_request_id
    from oh.tools.remember import _fields_read
    from oh.tools.schemas import Remember, validate_arguments

    changes = arguments.get("changes")
    if type(changes) is list:
        changes = _fields_read(changes)
    parsed = parse_changes(changes)
    validate_arguments("remember", arguments)
    based_on = arguments["based_on"]
    based_on = based_on if type(based_on) is int else int(based_on)
    return Remember(parse_based_on(based_on), parse_request_id(arguments["request_id"]), parsed)


def _outcome(parse: Callable[[], Any]) -> tuple[str, Any]:
    """What a parse gave, types included (``5.0 == 5`` and ``True == 1`` in Python)."""
    try:
        parsed = parse()
    except InvalidArgument as exc:
        return "refused", (exc.code, str(exc))
    return "accepted", (repr(parsed), type(parsed.based_on), type(parsed.request_id))
