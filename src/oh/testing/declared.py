"""What a backend's harness declares it cannot offer a conformance suite, and how that is said.

A few conformance tests need something beneath the backend: raw SQL on its database (to check
what the database itself refuses), or the files it keeps (to scan them for forgotten text). A
backend without such a thing (``oh.storage.memory`` keeps its rows in Python objects) has nothing
there to test. Its harness says so in ``cannot``; each such test is then skipped with a reason
that starts ``declared:``, and ``tests/conftest.py`` lists them, per harness, at the end of the
run. A harness that lacks the thing without declaring it fails the test instead: a missing
method is a bug in the harness, not an exemption.
"""

from __future__ import annotations

from typing import Any, NoReturn

import pytest

from oh.keys.sealing import keyring_of

__all__ = [
    "CONFORMANCE",
    "DECLARED",
    "FILES",
    "PLAIN_CONTENT",
    "RAW_SQL",
    "combination",
    "not_offered",
    "ran",
    "skip_declared",
]

# The things a harness may declare it cannot offer, as the reports name them.
RAW_SQL = "raw SQL beneath the backend"
FILES = "database files to scan"
# A sealed store keeps no plain content, so a test that edits it in place has nothing to edit.
PLAIN_CONTENT = "plain content to edit in place"
# How a declared skip's reason starts (``tests/conftest.py`` finds them by it).
DECLARED = "declared:"


def not_offered(harness: object, what: str, why: str) -> NoReturn:
    """Skip the test when ``harness`` declares ``what`` in its ``cannot``; fail it otherwise."""
    name = type(harness).__name__
    if what in getattr(harness, "cannot", frozenset()):
        pytest.skip(f"{DECLARED} {name} cannot offer {what}: {why}")
    pytest.fail(
        f"{name} offers no {what} and does not declare it (add it to {name}.cannot if the"
        " backend truly has none)"
    )


def skip_declared(harness: object, what: str, why: str) -> None:
    """Skip the test when ``harness`` declares ``what`` in its ``cannot``: for a thing no
    harness method can show missing (plain content in a sealed store's files)."""
    if what in getattr(harness, "cannot", frozenset()):
        not_offered(harness, what, why)


# -- which backend and keys each suite ran on ----------------------------------------------------

# The test's property that names its suite, backend and keys (``ran``), as ``suite|backend|keys``.
CONFORMANCE = "oh-conformance"


def combination(part: object) -> tuple[str, bool]:
    """The backend ``part`` (a store, registry or knowledge source a harness opened) runs on,
    and whether it runs with keys (notes sealed, or knowledge MACed): read from the part, never
    from what its harness says of itself."""
    module = type(part).__module__
    if module.startswith("oh.storage.postgres"):
        backend = "postgres"
    elif module.startswith("oh.storage.sqlite"):
        driver = getattr(part, "driver", "sqlite3")
        backend = "sqlite" if driver == "sqlite3" else f"sqlite ({driver} driver)"
    elif module.startswith("oh.storage.memory"):
        backend = "memory"
    else:
        backend = f"{type(part).__name__} (a test's)"
    keys = keyring_of(part) is not None or getattr(part, "macs", None) is not None
    return backend, keys


def ran(request: Any, suite: type, part: object) -> None:
    """Record on the running test which suite it belongs to and what ``part`` runs on
    (``tests/conftest.py`` tabulates them at the end of the run)."""
    backend, keys = combination(part)
    request.node.user_properties.append((CONFORMANCE, f"{suite.__name__}|{backend}|{keys}"))
