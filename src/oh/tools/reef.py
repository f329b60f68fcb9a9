"""One run of the reef example as the host answered it: the values the examples of the HTTP
reference are made of (the tools' own, in their declarations, and the owner routes', in
``oh.transports.openapi``), each valid against its schema (tests/test_openapi.py)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "FIGURE",
    "FIGURE_DIGEST",
    "NOTEBOOK",
    "ROWS",
    "SIGNED_ANSWER",
    "SURVEY",
    "SURVEY_DIGEST",
    "WRITTEN_AT",
    "note",
]

NOTEBOOK = "nb_d854b0ba096f287a642a2529f39be464"
SURVEY_DIGEST = "a648140fd47a9b7b9e425e35461e254f7d6fa779c91ed738118936a6e8d2015e"
FIGURE_DIGEST = "18fa9b2d3f58fd41a16a200cc33fc0159e471a0d26ec46f4f2d1fe46c05c2b53"
WRITTEN_AT = "2026-03-02T09:15:31.402877Z"
SURVEY = {
    "name": "lead:reef-survey-2016",
    "text": "The 2016 survey's methods section is missing; do not rely on its numbers.",
}
FIGURE = {
    "name": "todo:check-figure-3",
    "text": "Check figure 3 against the second paper's recovery curve.",
    "depends_on": ["lead:reef-survey-2016"],
}


def note(record: dict[str, Any], digest: str) -> dict[str, Any]:
    """A note as ``read`` and the records route answer it."""
    return {
        "origin": "note",
        "contradicts": [],
        "depends_on": record.get("depends_on", []),
        "fields": {},
        "kind": record["name"].partition(":")[0],
        "name": record["name"],
        "supports": [],
        "text": record["text"],
        "digest": digest,
        "author": "agent:run-1",
        "written_at": WRITTEN_AT,
        "version": 1,
    }


ROWS: list[dict[str, Any]] = [
    {"origin": "note", "kind": "lead", "name": SURVEY["name"], "digest": SURVEY_DIGEST},
    {"origin": "note", "kind": "todo", "name": FIGURE["name"], "digest": FIGURE_DIGEST},
]
# The explain token of the query example: what a query answer signs, not a credential.
SIGNED_ANSWER = (
    "eyJhIjoiYW5fZGVmYTA0YTY5YWJkYWMwMWU5MWU4Mzk1YmY5ZTBhN2UiLCJjIjoiYWdlbnQ6bmJfZDg1NGIwYmEwOTZm"
    "Mjg3YTY0MmEyNTI5ZjM5YmU0NjQiLCJlIjoxNzk2MTk3NDcyLCJrIjoiZXhwbGFpbiIsIm4iOiJuYl9kODU0YjBiYTA5"
    "NmYyODdhNjQyYTI1MjlmMzliZTQ2NCJ9.TnCwzFEYuMoG_pQhpm9u649VcaFW6NN2unZrwl7fl-o"
)
