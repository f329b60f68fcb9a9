"""The bootstrap: ``current_notes`` once, on the agent's behalf, when its tools load. Not a tool
the agent calls; the host hands it over (the MCP instructions, ``GET .../bootstrap``)."""

from __future__ import annotations

import heapq
import itertools
from typing import Any

from oh.core.canonical import canonical_text
from oh.tools.json_schema import DIGEST, NAME, ORIGIN, object_of, published
from oh.tools.spec import Caller, Service

__all__ = ["BOOTSTRAP_CHARS", "BOOTSTRAP_ROWS", "RESULT", "run"]

BOOTSTRAP_ROWS = 24
BOOTSTRAP_CHARS = 4000

RESULT = published(
    object_of(
        {
            "rows": {
                "type": "array",
                "items": object_of(
                    {"origin": ORIGIN, "kind": {"type": "string"}, "name": NAME, "digest": DIGEST},
                    ["origin", "kind", "name", "digest"],
                ),
            },
            "total": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
            "version": {"type": "integer"},
            "revision": {"type": ["integer", "null"]},
        },
        ["rows", "total", "truncated", "version", "revision"],
    )
)


def run(tools: Service, caller: Caller) -> dict[str, Any]:
    """At most 24 rows or 4,000 characters of the rows' RFC 8785 form, names and digests only."""
    notebook = tools.open_notebook(caller)
    view = tools.views.of(notebook)
    # current_notes' order (name, then note before reviewed) over two sorted lists.
    ordered = heapq.merge(
        (view.notes[name] for name in sorted(view.notes)),
        (view.reviewed[name] for name in sorted(view.reviewed)),
        key=lambda e: (e.name, e.origin != "note"),
    )
    total = len(view.notes) + len(view.reviewed)
    rows: list[dict[str, Any]] = []
    size = 2  # "[]"
    for entry in itertools.islice(ordered, BOOTSTRAP_ROWS):
        item = {
            "origin": entry.origin,
            "kind": entry.kind,
            "name": entry.name,
            "digest": entry.digest,
        }
        grown = size + len(canonical_text(item)) + (1 if rows else 0)
        if grown > BOOTSTRAP_CHARS:
            break
        rows.append(item)
        size = grown
    return {
        "rows": rows,
        "total": total,
        "truncated": len(rows) < total,
        "version": view.notebook.version,
        "revision": view.revision,
    }
