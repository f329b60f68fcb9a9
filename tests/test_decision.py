"""The decision of a remember call (``oh.core.decision.decide``): one pure function every backend
calls with what it read under its write lock. Each outcome and the order of the checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oh.core.changes import Refused, entry_hash, fingerprint, genesis_hash, parse_changes
from oh.core.decision import Call, Reuse, Seen, Write, decide
from oh.errors import AlreadyExists, Expired, Forbidden, NotFound, Purged, RequestIdReused

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = "2026-03-02T12:00:00.000000Z"
HEAD = genesis_hash("nb_1")


def call(based_on: int = 0, *changes: dict[str, Any], request_id: str = "r1") -> Call:
    return Call.prepare(
        "nb_1",
        based_on=based_on,
        request_id=request_id,
        changes=parse_changes(
            list(changes) or [{"op": "add", "record": {"name": "claim:a", "text": "t"}}]
        ),
        author="agent:x",
        now=NOW,
    )


def seen(
    version: int = 0,
    *,
    state: str = "open",
    forgets_at: str = LATER,
    prior: tuple[int, str] | None = None,
    existing: tuple[str, ...] = (),
) -> Seen:
    prior_version, prior_fingerprint = prior or (None, None)
    return Seen(state, forgets_at, version, HEAD, prior_version, prior_fingerprint, existing)


def test_a_fresh_call_at_the_head_writes_the_chained_entry_and_answers_applied() -> None:
    decided = decide(call(), seen())
    assert isinstance(decided, Write)
    entry, result = decided
    assert (entry.version, entry.prev_hash, entry.author, entry.request_id) == (
        1,
        HEAD,
        "agent:x",
        "r1",
    )
    assert entry.written_at == "2026-03-01T12:00:00.000000Z"
    assert entry.hash == entry_hash(*entry[:8])
    assert entry.fingerprint == fingerprint(0, call().changes)
    assert result == entry.result()


def test_a_stale_based_on_is_refused_with_the_current_version() -> None:
    assert decide(call(2), seen(5)) == Refused(current_version=5)


def test_an_identical_retry_reuses_its_original_even_when_stale() -> None:
    original = call()
    assert decide(original, seen(7, prior=(3, original.fingerprint))) == Reuse(3)


def test_a_request_id_reused_with_another_payload_is_refused() -> None:
    other = call(0, {"op": "remove", "name": "claim:a"})
    with pytest.raises(RequestIdReused):
        decide(other, seen(1, prior=(1, call().fingerprint), existing=("claim:a",)))


@pytest.mark.parametrize(
    ("state", "forgets_at", "error"),
    [
        ("purged", LATER, Purged),
        ("empty", LATER, Purged),
        ("opening", LATER, Forbidden),
        ("open", "2026-03-01T12:00:00.000000Z", Expired),
        ("open", "2026-03-01T11:00:00.000000Z", Expired),
    ],
)
def test_a_notebook_that_is_not_writable_refuses_even_an_identical_retry(
    state: str, forgets_at: str, error: type[Exception]
) -> None:
    original = call()
    with pytest.raises(error):
        decide(original, seen(state=state, forgets_at=forgets_at, prior=(1, original.fingerprint)))


def test_the_changes_must_fit_the_records_that_exist() -> None:
    with pytest.raises(AlreadyExists):
        decide(call(), seen(existing=("claim:a",)))
    with pytest.raises(NotFound):
        decide(call(0, {"op": "replace", "record": {"name": "claim:a", "text": "u"}}), seen())
    decided = decide(call(0, {"op": "remove", "name": "claim:a"}), seen(existing=("claim:a",)))
    assert isinstance(decided, Write)
    assert decided.result.to_json()["written"] == [{"name": "claim:a", "digest": None}]


def test_a_stale_call_is_refused_before_its_changes_are_checked() -> None:
    # The agent is told to read again, not that its add collides with a record it has not seen.
    assert decide(call(0), seen(1, existing=("claim:a",))) == Refused(current_version=1)


@settings(max_examples=200, deadline=None)
@given(
    based_on=st.integers(0, 5),
    version=st.integers(0, 5),
    state=st.sampled_from(["opening", "open", "purged", "empty"]),
    expired=st.booleans(),
    prior=st.sampled_from([None, "same", "other"]),
    exists=st.booleans(),
)
def test_the_decision_is_exactly_the_rule(
    based_on: int, version: int, state: str, expired: bool, prior: str | None, exists: bool
) -> None:
    made = call(based_on)
    forgets_at = (NOW - timedelta(hours=1) if expired else NOW + timedelta(hours=1)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )
    fingerprints = {None: None, "same": made.fingerprint, "other": "0" * 64}
    observed = seen(
        version,
        state=state,
        forgets_at=forgets_at,
        prior=None if prior is None else (2, fingerprints[prior] or ""),
        existing=("claim:a",) if exists else (),
    )
    try:
        outcome: object = decide(made, observed)
    except Exception as exc:  # the error is what is compared
        outcome = type(exc)
    if state in ("purged", "empty"):
        assert outcome is Purged
    elif expired:
        assert outcome is Expired
    elif state == "opening":
        assert outcome is Forbidden
    elif prior == "other":
        assert outcome is RequestIdReused
    elif prior == "same":
        assert outcome == Reuse(2)
    elif based_on != version:
        assert outcome == Refused(current_version=version)
    elif exists:
        assert outcome is AlreadyExists
    else:
        assert isinstance(outcome, Write) and outcome.entry.version == version + 1
