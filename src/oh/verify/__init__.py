"""Verify and rebuild (docs/design.md, docs/cli.md): the log is the truth, the rest derived copies.

``verify`` replays each notebook's log from the start, checks the hash chain, every version and
every digest, compares the replayed state with the current-record table, and reports each
difference. Every other derived or stamped value is checked too: each kept answer is recomputed
from the log at its version (and the knowledge pinned at its revision) and compared row by row;
each recall vector and the notebook's metadata are checked against the seals written with them
(``oh.core.seals``). ``rebuild`` replaces the current-record table with the replayed state.

``verify_store`` can spread the notebooks over processes (``jobs``): each worker opens its own
read connections with the picklable ``reopen`` it is given and verifies a run of consecutive
notebooks; the parent joins the runs' reports in notebook order, so the report is the same,
problem for problem, as one process makes. A worker that raises or dies ends the verify with a
typed error, never a hang.
"""

from __future__ import annotations

from oh.core.changes import replay
from oh.verify.knowledge import verify_knowledge, verify_reviewed_vectors
from oh.verify.notebooks import rebuild, verify_notebook
from oh.verify.pool import SPREAD_FROM_ENTRIES, Reopen, verify_store
from oh.verify.report import Problem, VerifyReport

__all__ = [
    "SPREAD_FROM_ENTRIES",
    "Problem",
    "Reopen",
    "VerifyReport",
    "rebuild",
    "replay",
    "verify_knowledge",
    "verify_notebook",
    "verify_reviewed_vectors",
    "verify_store",
]
