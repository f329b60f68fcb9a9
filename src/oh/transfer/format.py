"""The names of the export format's lines, shared by writing and reading them."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FORMAT", "FORMAT_VERSION", "Progress", "no_progress"]

FORMAT = "oh-export"
FORMAT_VERSION = 1
Progress = Callable[[str], None]


def no_progress(_message: str) -> None:
    return None
