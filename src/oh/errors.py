"""Oh's one exception tree, its stable codes, and the one table mapping codes to HTTP status.

Every error a caller of Oh can see is an ``OhError``. Each class carries a stable ``code``
(docs/tools.md) that is part of the public contract; messages are for humans and may change.

    OhError
    ├── InvalidArgument          invalid_argument     400
    │   ├── TooManyChanges       too_many_changes     400
    │   ├── UnknownQuestion      unknown_question     400
    │   └── UnsupportedMediaType unsupported_media_type  415  (HTTP: a body that is not JSON)
    ├── TokenInvalid             token_invalid        400
    ├── TokenExpired             token_expired        400
    ├── Unauthenticated          unauthenticated      401
    ├── Forbidden                forbidden            403
    ├── NotFound                 not_found            404
    ├── MethodNotAllowed         method_not_allowed   405  (HTTP: no such method on a route)
    ├── AlreadyExists            already_exists       409
    ├── RequestIdReused          request_id_reused    409
    ├── Expired                  expired              410
    ├── Purged                   purged               410
    ├── IntegrityError           integrity            500  (stored data was damaged)
    └── StorageUnavailable       storage_unavailable  503
        └── Bug                  storage_unavailable  503  (an unexpected exception; see below)

A ``stale`` write is not an error: ``remember`` answers it as a refusal result (docs/design.md).

An exception Oh did not expect is a bug. The public codes have none for it, so a caller gets
``storage_unavailable`` (503), which is also what an ``OhError`` raised without a code of its own
(``internal``) answers; the catch-all of each transport turns either into a ``Bug`` with
``public_error``, logs it, and counts it under the outcome ``bug``, so a bug never hides among
genuine storage failures in the metrics.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "HTTP_STATUS",
    "AlreadyExists",
    "Bug",
    "Expired",
    "Forbidden",
    "IntegrityError",
    "InvalidArgument",
    "MethodNotAllowed",
    "NotFound",
    "OhError",
    "Purged",
    "RequestIdReused",
    "StorageUnavailable",
    "TokenExpired",
    "TokenInvalid",
    "TooManyChanges",
    "Unauthenticated",
    "UnknownQuestion",
    "UnsupportedMediaType",
    "error_for_code",
    "public_error",
]


class OhError(Exception):
    """Base of every error Oh raises. ``code`` is stable; ``details`` go into the error body."""

    code: ClassVar[str] = "internal"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    @property
    def http_status(self) -> int:
        return HTTP_STATUS.get(self.code, 503)  # ``internal``: a bug, answered as a Bug is

    @property
    def outcome(self) -> str:
        """What the metrics count this error as: its code, ``bug`` for a ``Bug``."""
        return self.code

    def to_json(self) -> dict[str, Any]:
        """The public error body: ``{"error": {"code", "message", ...details}}``."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        body.update(self.details)
        return {"error": body}


class InvalidArgument(OhError):
    code = "invalid_argument"


class TooManyChanges(InvalidArgument):
    code = "too_many_changes"


class UnknownQuestion(InvalidArgument):
    code = "unknown_question"


class UnsupportedMediaType(InvalidArgument):
    code = "unsupported_media_type"


class TokenInvalid(OhError):
    code = "token_invalid"


class TokenExpired(OhError):
    code = "token_expired"


class Unauthenticated(OhError):
    code = "unauthenticated"


class Forbidden(OhError):
    code = "forbidden"


class NotFound(OhError):
    code = "not_found"


class MethodNotAllowed(OhError):
    code = "method_not_allowed"


class AlreadyExists(OhError):
    code = "already_exists"


class RequestIdReused(OhError):
    code = "request_id_reused"


class Expired(OhError):
    code = "expired"


class Purged(OhError):
    code = "purged"


class IntegrityError(OhError):
    code = "integrity"


class StorageUnavailable(OhError):
    code = "storage_unavailable"


class Bug(StorageUnavailable):
    """An exception Oh did not expect, as its caller sees it (``storage_unavailable``)."""

    @property
    def outcome(self) -> str:
        return "bug"


HTTP_STATUS: dict[str, int] = {
    "invalid_argument": 400,
    "too_many_changes": 400,
    "unknown_question": 400,
    "unsupported_media_type": 415,
    "token_invalid": 400,
    "token_expired": 400,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "already_exists": 409,
    "request_id_reused": 409,
    "expired": 410,
    "purged": 410,
    "integrity": 500,
    "storage_unavailable": 503,
}

_BY_CODE: dict[str, type[OhError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        TooManyChanges,
        UnknownQuestion,
        UnsupportedMediaType,
        TokenInvalid,
        TokenExpired,
        Unauthenticated,
        Forbidden,
        NotFound,
        MethodNotAllowed,
        AlreadyExists,
        RequestIdReused,
        Expired,
        Purged,
        IntegrityError,
        StorageUnavailable,
    )
}


def public_error(exc: Exception) -> OhError:
    """The error a caller is answered with for ``exc``: an ``OhError`` with a public code is
    itself; anything else (including an ``OhError`` raised without a code) is a ``Bug``."""
    if isinstance(exc, OhError) and exc.code in HTTP_STATUS:
        return exc
    return Bug(f"internal error: {type(exc).__name__}")


def error_for_code(code: str, message: str, **details: Any) -> OhError:
    """Rebuild a typed error from its public code (e.g. on the client side of a transport)."""
    return _BY_CODE.get(code, OhError)(message, **details)
