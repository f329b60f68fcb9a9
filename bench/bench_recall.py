"""Recall benchmark: Oh's vector index against exact search, measured in the same run.

Figures:

1. Search: top-10 latency (p50, p95) and recall@10 of ``oh.recall.VectorIndex`` with its HNSW
   graph (usearch, int8, re-scored exactly) against the exact scan of the same vectors, at
   10,000 and 100,000 vectors of 384 dimensions. Targets at 100k: p50 ≤ 1 ms and
   recall@10 ≥ 0.95. The exact baseline is ``VectorIndex`` below its graph threshold (a numpy
   matrix-vector product, argpartition, exact re-scoring), and raw numpy for reference.
   The vectors are synthetic but shaped like sentence embeddings: unit vectors near a
   32-dimensional subspace, queries near stored vectors (uniform random vectors in 384
   dimensions are a known worst case for every graph index and look like no real corpus).
2. Rebuild: ``Recall.rebuild`` of a notebook of 10,000 notes with the deterministic hashing
   embedder (read, embed, store every vector), seconds per 10,000 notes, against embedding the
   same rendered texts alone.
3. End to end: ``Recall.recall`` (embed the query, sync, search, rank) on that notebook.
4. Local model (``oh[local]``): embeddings per second of note-like texts, one-off load time.

No figure is asserted on; this is a measurement, not a test.

Run from the repository root::

    python bench/bench_recall.py            # full sizes, a few minutes on 2 cores
    python bench/bench_recall.py --quick    # smoke run, under a minute
    python bench/bench_recall.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from oh.core.changes import parse_changes
from oh.recall import IndexSettings, Recall, VectorIndex, render
from oh.recall.embedders import HashingEmbedder, LocalEmbedder, import_usearch
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.storage.sqlite.vectors import SqliteVectorStore

DIMENSIONS = 384


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def synthetic(rows: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    generator = np.random.default_rng(seed)
    basis = generator.standard_normal((32, DIMENSIONS)).astype(np.float32)
    latent = generator.standard_normal((rows, 32)).astype(np.float32)
    data = latent @ basis + 0.1 * generator.standard_normal((rows, DIMENSIONS)).astype(np.float32)
    near = latent[generator.integers(0, rows, queries)]
    probe = (near + 0.3 * generator.standard_normal((queries, 32)).astype(np.float32)) @ basis
    data /= np.linalg.norm(data, axis=1, keepdims=True)
    probe /= np.linalg.norm(probe, axis=1, keepdims=True)
    return data, probe


def timed(
    search: Callable[[np.ndarray], Any], queries: np.ndarray
) -> tuple[list[float], list[Any]]:
    for query in queries[:20]:
        search(query)  # warm-up
    latencies, answers = [], []
    for query in queries:
        started = time.perf_counter()
        answers.append(search(query))
        latencies.append(time.perf_counter() - started)
    return latencies, answers


def bench_search(rows: int, queries: int, threads: int) -> dict[str, Any]:
    data, probes = synthetic(rows, queries)
    digests = [f"{i:064x}" for i in range(rows)]
    exact = VectorIndex(DIMENSIONS, IndexSettings(ann_threshold=10**9))
    exact.add(digests, data)
    graph = VectorIndex(DIMENSIONS, IndexSettings(ann_threshold=1, threads=threads))
    graph.add(digests, data)
    started = time.perf_counter()
    built = graph.build_graph()
    build_seconds = time.perf_counter() - started

    def raw(query: np.ndarray) -> np.ndarray:
        scores = data @ query
        best = np.argpartition(-scores, 10)[:10]
        return best[np.argsort(-scores[best])]

    raw_lat, _ = timed(raw, probes)
    exact_lat, truth = timed(lambda q: [d for d, _ in exact.search(q, 10)[:10]], probes)
    result: dict[str, Any] = {
        "vectors": rows,
        "queries": queries,
        "raw_numpy_p50_ms": statistics.median(raw_lat) * 1000,
        "exact_p50_ms": statistics.median(exact_lat) * 1000,
        "exact_p95_ms": percentile(exact_lat, 0.95) * 1000,
    }
    if not built:
        result["graph"] = "usearch is not installed (pip install 'oh-memory[ann]')"
        return result
    graph_lat, found = timed(lambda q: [d for d, _ in graph.search(q, 10)[:10]], probes)
    hits = sum(len(set(a) & set(b)) for a, b in zip(truth, found, strict=True))
    result.update(
        {
            "graph_build_s": build_seconds,
            "graph_p50_ms": statistics.median(graph_lat) * 1000,
            "graph_p95_ms": percentile(graph_lat, 0.95) * 1000,
            "recall_at_10": hits / (10 * queries),
            "p50_ratio_graph_vs_exact": statistics.median(graph_lat) / statistics.median(exact_lat),
        }
    )
    return result


NOUNS = [
    "reef",
    "coral",
    "survey",
    "dataset",
    "bleaching",
    "threshold",
    "figure",
    "paper",
    "methods",
    "sample",
    "site",
]
WORDS = [
    "missing",
    "ruled",
    "out",
    "check",
    "against",
    "second",
    "recovered",
    "within",
    "years",
    "after",
    "ends",
]


def note_text(rng: random.Random) -> str:
    words = [rng.choice(NOUNS if i % 2 else WORDS) for i in range(rng.randint(6, 40))]
    return " ".join(words) + f" {rng.randint(1990, 2025)}"


def bench_rebuild(notes: int, workdir: Path) -> dict[str, Any]:
    rng = random.Random(1)
    memory = SqliteMemoryStore(workdir / "memory.db", synchronous="NORMAL")
    vectors = SqliteVectorStore(workdir / "memory.db", synchronous="NORMAL")
    notebook = Notebooks(memory).open("ann", "doc", "bench")
    for version, start in enumerate(range(0, notes, 64)):
        changes = [
            {"op": "add", "record": {"name": f"note:n{i:06d}", "text": note_text(rng)}}
            for i in range(start, min(notes, start + 64))
        ]
        memory.remember(
            notebook.id,
            based_on=version,
            request_id=f"r-{start}",
            changes=parse_changes(changes),
            author="bench",
            now=datetime.now(UTC),
        )
    embedder = HashingEmbedder()
    recall = Recall(memory, vectors, embedder, batch=64)
    recall.catch_up(notebook.id)  # also warms the embedder's feature cache for both timings
    report = recall.rebuild()
    texts = [render(record.content) for record in memory.records(notebook.id)]
    started = time.perf_counter()
    for start in range(0, len(texts), 64):
        embedder.embed(texts[start : start + 64])
    embed_only = time.perf_counter() - started
    queries = [note_text(rng) for _ in range(300)]
    latencies, _ = timed(lambda text: recall.recall(notebook.id, text, limit=10), queries)
    memory.close()
    vectors.close()
    per_10k = report.seconds * 10_000 / notes
    return {
        "notes": notes,
        "rebuild_s": report.seconds,
        "rebuild_s_per_10k": per_10k,
        "notes_per_s": notes / report.seconds,
        "embed_only_s_per_10k": embed_only * 10_000 / notes,
        "ratio_rebuild_vs_embed_only": report.seconds / embed_only,
        "recall_end_to_end_p50_ms": statistics.median(latencies) * 1000,
        "recall_end_to_end_p95_ms": percentile(latencies, 0.95) * 1000,
    }


def bench_local(texts: int) -> dict[str, Any]:
    rng = random.Random(2)
    corpus = [f"note note:n{i}: {note_text(rng)}" for i in range(texts)]
    embedder = LocalEmbedder()
    try:
        started = time.perf_counter()
        embedder.embed(corpus[:1])
        load = time.perf_counter() - started
    except Exception as exc:  # the extra is optional
        return {"local": f"unavailable: {exc}"}
    started = time.perf_counter()
    embedder.embed(corpus)
    seconds = time.perf_counter() - started
    hashing = HashingEmbedder()
    started = time.perf_counter()
    hashing.embed(corpus)
    hashed = time.perf_counter() - started
    return {
        "texts": texts,
        "load_s": load,
        "local_texts_per_s": texts / seconds,
        "hashing_texts_per_s": texts / hashed,
        "model_file_mb": 22.9,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a smoke run")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--threads", type=int, default=0, help="graph build threads (0: all)")
    parser.add_argument("--dir", help="parent directory for the temporary database")
    args = parser.parse_args()
    sizes = [2_000, 10_000] if args.quick else [10_000, 100_000]
    queries = 200 if args.quick else 500
    notes = 2_000 if args.quick else 10_000
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "openblas_env": {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS")},
        "usearch": import_usearch() is not None,
    }
    results["search"] = [bench_search(rows, queries, args.threads) for rows in sizes]
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        results["rebuild"] = bench_rebuild(notes, Path(workdir))
    results["local"] = bench_local(200 if args.quick else 1000)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"python {results['python']} on {results['machine']}; env {results['openblas_env']}")
    for row in results["search"]:
        print(
            f"search {row['vectors']:>7,} x {DIMENSIONS}: exact p50 {row['exact_p50_ms']:.3f} ms"
            f" (p95 {row['exact_p95_ms']:.3f}; raw numpy {row['raw_numpy_p50_ms']:.3f})",
            end="",
        )
        if "graph_p50_ms" in row:
            print(
                f" | graph p50 {row['graph_p50_ms']:.3f} ms (p95 {row['graph_p95_ms']:.3f})"
                f" = {row['p50_ratio_graph_vs_exact']:.3f}x exact,"
                f" recall@10 {row['recall_at_10']:.4f}, built in {row['graph_build_s']:.1f} s"
            )
        else:
            print(f" | {row['graph']}")
    rebuild = results["rebuild"]
    print(
        f"rebuild {rebuild['notes']:,} notes (hashing): {rebuild['rebuild_s_per_10k']:.2f} s per"
        f" 10k notes ({rebuild['notes_per_s']:,.0f} notes/s) = "
        f"{rebuild['ratio_rebuild_vs_embed_only']:.2f}x embedding alone"
        f" ({rebuild['embed_only_s_per_10k']:.2f} s per 10k)"
    )
    print(
        f"recall end to end on {rebuild['notes']:,} notes: p50"
        f" {rebuild['recall_end_to_end_p50_ms']:.3f} ms, p95"
        f" {rebuild['recall_end_to_end_p95_ms']:.3f} ms"
    )
    local = results["local"]
    if "local_texts_per_s" in local:
        print(
            f"local model: {local['local_texts_per_s']:,.0f} texts/s over {local['texts']} notes"
            f" (load {local['load_s']:.2f} s); hashing {local['hashing_texts_per_s']:,.0f}"
            " texts/s"
        )
    else:
        print(f"local model: {local['local']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
