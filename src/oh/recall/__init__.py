"""Similarity recall (docs/recall.md): embedding adapters, a derived vector index, and the
``Recall`` service the ``recall`` tool runs on.

* ``embedders`` — the ``Embedder`` protocol and its hashing, local-model and OpenAI-compatible
  adapters, with the ``EmbedderError`` tree.
* ``index`` — one scope's in-memory index: exact cosine, or an HNSW graph when large.
* ``service`` — ``Recall``: recall, catch-up of pending embeddings, rebuild.
* ``background`` — off the request path: ``DeadlineRecall`` (a deadline on every call),
  ``ShadowRecall`` (shadow measurements in a bounded worker), ``CatchUpWorker``.

Vectors are derived data: rows of ``(digest, vector)`` in the memory database, never text,
dropped and rebuilt at will. See docs/recall.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each name is imported from its module when first used (PEP 562), so importing one light
# module of this package (``oh.recall.names``) does not import numpy, which the adapters and
# the index need and a core install of Oh does not have.
_WHERE = {
    "CatchUpPass": "oh.recall.background",
    "CatchUpReport": "oh.recall.service",
    "CatchUpWorker": "oh.recall.background",
    "DEFAULT_DEADLINE": "oh.recall.background",
    "DEFAULT_LIMIT": "oh.recall.service",
    "DeadlineRecall": "oh.recall.background",
    "Embedder": "oh.recall.embedders",
    "EmbedderError": "oh.recall.embedders",
    "EmbedderRejected": "oh.recall.embedders",
    "EmbedderResponseInvalid": "oh.recall.embedders",
    "EmbedderUnavailable": "oh.recall.embedders",
    "HashingEmbedder": "oh.recall.embedders",
    "IndexSettings": "oh.recall.index",
    "LocalEmbedder": "oh.recall.embedders",
    "MAX_LIMIT": "oh.recall.service",
    "OpenAIEmbedder": "oh.recall.embedders",
    "RebuildReport": "oh.recall.service",
    "Recall": "oh.recall.service",
    "RecallAnswer": "oh.recall.service",
    "RecallDeadlineExceeded": "oh.recall.background",
    "RecallRow": "oh.recall.service",
    "ShadowRecall": "oh.recall.background",
    "VectorIndex": "oh.recall.index",
    "VectorStore": "oh.recall.service",
    "embedder_from_env": "oh.recall.embedders",
    "render": "oh.recall.service",
}

if TYPE_CHECKING:
    from oh.recall.background import (
        DEFAULT_DEADLINE,
        CatchUpPass,
        CatchUpWorker,
        DeadlineRecall,
        RecallDeadlineExceeded,
        ShadowRecall,
    )
    from oh.recall.embedders import (
        Embedder,
        EmbedderError,
        EmbedderRejected,
        EmbedderResponseInvalid,
        EmbedderUnavailable,
        HashingEmbedder,
        LocalEmbedder,
        OpenAIEmbedder,
        embedder_from_env,
    )
    from oh.recall.index import IndexSettings, VectorIndex
    from oh.recall.service import (
        DEFAULT_LIMIT,
        MAX_LIMIT,
        CatchUpReport,
        RebuildReport,
        Recall,
        RecallAnswer,
        RecallRow,
        VectorStore,
        render,
    )


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'oh.recall' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_DEADLINE",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "CatchUpPass",
    "CatchUpReport",
    "CatchUpWorker",
    "DeadlineRecall",
    "Embedder",
    "EmbedderError",
    "EmbedderRejected",
    "EmbedderResponseInvalid",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "IndexSettings",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "RebuildReport",
    "Recall",
    "RecallAnswer",
    "RecallDeadlineExceeded",
    "RecallRow",
    "ShadowRecall",
    "VectorIndex",
    "VectorStore",
    "embedder_from_env",
    "render",
]
