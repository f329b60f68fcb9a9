"""The ``read`` parser's shortcut for ``{"name": ...}`` accepts exactly what the schema does."""

from __future__ import annotations

from typing import Any

import fastjsonschema
from hypothesis import example, given
from hypothesis import strategies as st

from oh.errors import InvalidArgument
from oh.schemas import ARGUMENTS, Read, parse_arguments

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
