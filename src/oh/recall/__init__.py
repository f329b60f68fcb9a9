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
