"""The one UTC text form: ``utc_text`` against its definition, and its round trip."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from oh.core.clock import from_utc_text, utc_text
from oh.core.notebook import is_past

moments = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
offsets = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: timezone(timedelta(minutes=minutes))
)


@given(moments, offsets)
def test_utc_text_is_the_strftime_definition_in_any_zone(moment: datetime, zone: timezone) -> None:
    local = moment.astimezone(zone)
    assert utc_text(local) == moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert len(utc_text(local)) == 27
    assert from_utc_text(utc_text(local)) == moment


def test_utc_text_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        utc_text(datetime(2026, 11, 30, 12, 0))


def test_text_order_is_time_order() -> None:
    early = datetime(2026, 11, 30, 9, 59, 59, 999999, tzinfo=UTC)
    late = early + timedelta(microseconds=1)
    assert utc_text(early) < utc_text(late) == "2026-11-30T10:00:00.000000Z"


# A notebook's forget time as stored: ``utc_text``'s form, and what a damaged or foreign stamp
# could hold instead (fewer fraction digits, an offset, no fraction, not a time at all).
stamps = st.one_of(
    moments.map(utc_text),
    moments.map(lambda moment: utc_text(moment)[:-4] + "Z"),
    moments.map(lambda moment: moment.isoformat()),
    moments.map(lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")),
    st.text(max_size=30),
)


@given(moments, offsets, stamps)
def test_is_past_means_the_time_as_text_has_reached_the_stamp(
    moment: datetime, zone: timezone, stamp: str
) -> None:
    local = moment.astimezone(zone)
    assert is_past(local, stamp) is (utc_text(local) >= stamp)
    assert is_past(local, utc_text(moment)) is True
    assert is_past(local - timedelta(microseconds=1), utc_text(moment)) is False


def test_is_past_refuses_a_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        is_past(datetime(2026, 11, 30, 12, 0), "2026-11-30T12:00:00.000000Z")
