"""Seals (docs/design.md ``verify``): what binds a stamped value to what it was when Oh wrote it.

A derived value is checked by recomputing it (the current records from the log, a kept answer
from the log and the pinned knowledge). Two kinds of stored value cannot be recomputed that way,
so Oh writes a seal beside each and ``verify`` checks the value against it:

* a notebook's metadata (owner, document, run, started_at, forgets_at, pinned_revision and the
  state it was sealed in) is stamped, not derived from the log. The store seals it when it
  creates and when it opens the notebook; forgetting and the purge chain the tombstone's state
  and ``purged_at`` onto that seal (``closed_seal``), knowing only the seal itself, since the
  purge credential may not read owner, document or run.
* a recall vector can only be recomputed by calling the embedder again (a network call, or a
  model, and not every embedder is deterministic), so it is sealed with the digest, the model
  and the notebook (or owner) it was embedded for.

A seal is an unkeyed sha256: it makes every alteration that does not also recompute the seal
detectable. Whoever can write the database and knows these definitions can forge one; what
such a writer cannot forge is sealed content and MACed knowledge, under keys the database does
not hold (oh.keys, docs/keys.md).
"""

from __future__ import annotations

import hashlib
from typing import Any

from oh.core.canonical import canonical_text
from oh.core.notebook import Notebook
from oh.errors import OhError

__all__ = [
    "SEALED_PHASES",
    "closed_seal",
    "notebook_seal",
    "opened_seal",
    "row_seal",
    "seal_matches",
    "sealed_row_or_none",
    "vector_seal",
]

# The state a notebook's metadata is sealed in, by the state its row may hold: a live notebook
# is sealed in its own state; a tombstone's seal chains from the live seal it was closed from
# (forget closes an ``opening`` or an ``open`` notebook, the purge an ``open`` one, and marking
# ``empty`` an ``opening`` one).
SEALED_PHASES: dict[str, tuple[str, ...]] = {
    "opening": ("opening",),
    "open": ("open",),
    "purged": ("open", "opening"),
    "empty": ("opening",),
}


def notebook_seal(
    notebook_id: Any,
    owner: Any,
    document: Any,
    run: Any,
    started_at: Any,
    forgets_at: Any,
    pinned_revision: Any,
    state: str,
) -> str:
    """sha256 of ``"oh/notebook/seal\\n"`` and the canonical JSON of the metadata in ``state``.

    Raises ``invalid_argument`` (or ``TypeError``) for a value canonical JSON refuses: a stored
    value of the wrong type cannot have been sealed."""
    body = {
        "notebook": notebook_id,
        "owner": owner,
        "document": document,
        "run": run,
        "started_at": started_at,
        "forgets_at": forgets_at,
        "pinned_revision": pinned_revision,
        "state": state,
    }
    return hashlib.sha256(("oh/notebook/seal\n" + canonical_text(body)).encode("utf-8")).hexdigest()


def opened_seal(notebook: Notebook, pinned_revision: int | None) -> str:
    """The seal of ``notebook`` as it opens pinned at ``pinned_revision`` (both backends write
    it in the transaction that marks the notebook open)."""
    return notebook_seal(
        notebook.id,
        notebook.owner,
        notebook.document,
        notebook.run,
        notebook.started_at,
        notebook.forgets_at,
        pinned_revision,
        "open",
    )


def closed_seal(seal: str, state: str, purged_at: str) -> str:
    """The seal of a tombstone (``purged`` or ``empty`` at ``purged_at``) closed from a notebook
    sealed ``seal``. Plain text joined by newlines, so the PostgreSQL purge functions compute
    the same value in SQL (migration 0005)."""
    text = f"oh/notebook/closed\n{seal}\n{state}\n{purged_at}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def row_seal(
    notebook_id: str,
    owner: str,
    document: str,
    run: str,
    state: str,
    started_at: str,
    forgets_at: str,
    pinned_revision: int | None,
    purged_at: str | None,
) -> str:
    """The seal of a notebook row as Oh writes it in ``state`` (``expired`` is never stored:
    it is an ``open`` notebook past its time). A tombstone's seal is chained from the live seal
    it was most likely closed from (``purged``: ``open``; ``empty``: ``opening``); used where a
    row is sealed after the fact, by import and by the migration that introduced seals."""
    phase = SEALED_PHASES[state][0]
    sealed = notebook_seal(
        notebook_id, owner, document, run, started_at, forgets_at, pinned_revision, phase
    )
    if state in ("opening", "open"):
        return sealed
    # A tombstone without its time cannot match any seal: verify reports it.
    return closed_seal(sealed, state, purged_at or "")


def seal_matches(
    seal: Any,
    notebook_id: Any,
    owner: Any,
    document: Any,
    run: Any,
    state: Any,
    started_at: Any,
    forgets_at: Any,
    pinned_revision: Any,
    purged_at: Any,
) -> bool:
    """Whether ``seal`` is the seal of a notebook row holding exactly these values."""
    phases = SEALED_PHASES.get(state) if type(state) is str else None
    if type(seal) is not str or phases is None:
        return False
    live = state in ("opening", "open")
    if live and purged_at is not None:
        return False  # a live notebook has never been purged
    if not live and type(purged_at) is not str:
        return False
    for phase in phases:
        try:
            sealed = notebook_seal(
                notebook_id, owner, document, run, started_at, forgets_at, pinned_revision, phase
            )
        except (OhError, ValueError, TypeError):
            return False  # canonical JSON refused a value: it cannot have been sealed
        if seal == (sealed if live else closed_seal(sealed, state, purged_at)):
            return True
    return False


# How a rebuild's vectors are stored while it runs: under ``rebuild:`` and the model id they get
# when the rebuild swaps them in (``oh.recall.Recall.rebuild``).
STAGED_PREFIX = "rebuild:"


def vector_model(model_id: str) -> str:
    """The model a recall vector is bound to: a rebuild's staged vectors are bound to the model
    they become, so that swapping them in (renaming their model id) leaves every seal true."""
    return model_id.removeprefix(STAGED_PREFIX)


def vector_seal(
    kind: str, scope: str, model_id: str, digest: str, vector: bytes | bytearray | memoryview
) -> str:
    """sha256 binding a recall vector to what it was embedded for: ``kind`` is ``note`` (scope:
    the notebook id) or ``reviewed`` (scope: the owner); the model (``vector_model``); the
    record's digest; and the vector's bytes (little-endian float32)."""
    model_id = vector_model(model_id)
    head = f"oh/vector/{kind}\n{scope}\n{model_id}\n{digest}\n".encode()
    return hashlib.sha256(head + bytes(vector)).hexdigest()


def sealed_row_or_none(row: Any) -> str | None:
    """``row_seal`` of a stored notebook row (``id, owner, document, run, state, started_at,
    forgets_at, pinned_revision, purged_at``), or None for a row Oh cannot have written (a state
    it never stores, a value of the wrong type): a migration that seals existing rows must not
    fail on a damaged one, and verify then reports the missing seal."""
    try:
        return row_seal(*row)
    except (OhError, KeyError, TypeError, ValueError):
        return None
