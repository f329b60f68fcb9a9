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

from typing import NoReturn

import pytest

__all__ = ["DECLARED", "FILES", "RAW_SQL", "not_offered"]

# The things a harness may declare it cannot offer, as the reports name them.
RAW_SQL = "raw SQL beneath the backend"
FILES = "database files to scan"
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
