"""The clock shift of the test run (``OH_CLOCK_SHIFT_DAYS``), for this process and its children.

``tests/conftest.py`` starts it in the pytest process and puts this directory on ``PYTHONPATH``,
so every Python child that inherits the environment (``oh serve``, ``oh purge``, the stress
scripts and their workers) imports this module at start-up and moves its clock by the same
number of days. Each process moves from its own real time, so all of them agree on the shifted
time to within the moment it takes to start. Children started with an environment of their own
(no ``PYTHONPATH`` of the parent's) stay on the real clock.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

VARIABLE = "OH_CLOCK_SHIFT_DAYS"


def shift_days() -> int:
    """The shift asked for, 0 when none; a value that is not a whole number is refused."""
    value = os.environ.get(VARIABLE, "").strip()
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{VARIABLE} must be a whole number of days, not {value!r}") from None


def start_shift(days: int) -> Any:
    """Move this process's clock ``days`` ahead, ticking; returns the traveller to stop."""
    import time_machine

    traveller = time_machine.travel(datetime.now(UTC) + timedelta(days=days), tick=True)
    traveller.start()
    return traveller


if __name__ == "sitecustomize" and shift_days():
    _traveller = start_shift(shift_days())
