"""The error codes and their HTTP statuses are a public contract (SPEC §5, §11)."""

from __future__ import annotations

import pytest

from oh import errors
from oh.errors import HTTP_STATUS, OhError, error_for_code

SPEC_CODES = {
    "invalid_argument": 400,
    "too_many_changes": 400,
    "unknown_question": 400,
    "token_invalid": 400,
    "token_expired": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "already_exists": 409,
    "request_id_reused": 409,
    "expired": 410,
    "purged": 410,
    "integrity": 500,
    "storage_unavailable": 503,
}
# Extensions: what only an HTTP request can get wrong, with the status HTTP gives it.
HTTP_CODES = {"method_not_allowed": 405, "unsupported_media_type": 415}
CODES = {**SPEC_CODES, **HTTP_CODES}


def test_the_codes_and_statuses_are_exactly_the_specs_and_the_http_extensions() -> None:
    assert HTTP_STATUS == CODES


def test_every_error_class_has_a_code_in_the_table() -> None:
    classes = [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, OhError) and value is not OhError
    ]
    assert {cls.code for cls in classes} == set(CODES)


def test_integrity_is_the_only_500() -> None:
    assert [code for code, status in HTTP_STATUS.items() if status >= 500 and status < 503] == [
        "integrity"
    ]


@pytest.mark.parametrize("code", sorted(CODES))
def test_an_error_body_carries_code_and_message(code: str) -> None:
    error = error_for_code(code, "what happened", name="note:a")
    assert error.code == code
    assert error.http_status == CODES[code]
    assert error.to_json() == {
        "error": {"code": code, "message": "what happened", "name": "note:a"}
    }


def test_too_many_changes_and_unknown_question_are_invalid_arguments() -> None:
    assert issubclass(errors.TooManyChanges, errors.InvalidArgument)
    assert issubclass(errors.UnknownQuestion, errors.InvalidArgument)
    assert issubclass(errors.UnsupportedMediaType, errors.InvalidArgument)


def test_every_code_is_documented_with_its_status() -> None:
    import re
    from pathlib import Path

    table = (Path(__file__).resolve().parents[1] / "docs" / "tools.md").read_text()
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| (\d{3}) \|", table, re.MULTILINE))
    assert {code: int(status) for code, status in documented.items()} == CODES


def test_a_bug_is_public_as_storage_unavailable_and_counted_apart() -> None:
    from oh.errors import Bug, NotFound, StorageUnavailable, public_error

    found = NotFound("no such thing")
    assert public_error(found) is found
    for raised in (TypeError("x"), KeyError("k"), OhError("no code of its own")):
        error = public_error(raised)
        assert isinstance(error, Bug) and isinstance(error, StorageUnavailable)
        assert error.to_json() == {
            "error": {
                "code": "storage_unavailable",
                "message": f"internal error: {type(raised).__name__}",
            }
        }
        assert (error.http_status, error.outcome) == (503, "bug")
    assert OhError("bare").http_status == 503  # ``internal`` has a status: what a Bug answers
    assert StorageUnavailable("down").outcome == "storage_unavailable"
