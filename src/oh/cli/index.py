"""``oh index rebuild`` for vectors (docs/cli.md): embed everything again, then swap the new vectors
in for the old ones; if embedding fails, the old index stays as it was.

A thin layer over ``oh.recall.Recall.rebuild``; ``add_rebuild_arguments`` adds its options.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from oh.cli.options import read_locations
from oh.config import open_knowledge_store, open_memory_store, open_vector_store
from oh.errors import OhError
from oh.recall.names import EMBEDDERS

__all__ = ["add_rebuild_arguments", "cmd_index", "configure_index", "rebuild_command"]


def configure_index(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["rebuild"], metavar="{rebuild}")
    add_rebuild_arguments(command)


def add_rebuild_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        help="embedding adapter (env OH_EMBEDDER, default hashing); openai reads"
        " OH_EMBEDDINGS_URL, OH_EMBEDDINGS_MODEL, OH_EMBEDDINGS_DIMENSIONS, OH_EMBEDDINGS_API_KEY",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def rebuild_command(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Rebuild every vector of the memory database; 0 when nothing is left pending. An embedder
    that fails stops it with the old index intact (``OhError``, exit status 2 from ``oh``)."""
    from oh.recall.embedders import embedder_from_env  # numpy: the server or local extra
    from oh.recall.service import Recall

    out = out or sys.stdout
    err = err or sys.stderr
    as_json = bool(getattr(args, "json", False))
    locations = read_locations(args)
    locations.prepare()
    embedder = embedder_from_env(kind=getattr(args, "embedder", None))
    memory = open_memory_store(locations)
    try:
        vectors = open_vector_store(locations)
        try:
            knowledge = open_knowledge_store(locations)
            try:
                recall = Recall(memory, vectors, embedder, knowledge)

                def progress(done: int, total: int) -> None:
                    if not as_json and err.isatty():
                        err.write(f"\rembedding notebooks {done}/{total}")
                        err.flush()

                try:
                    report = recall.rebuild(progress)
                except OhError:
                    if not as_json and err.isatty():
                        err.write("\n")  # end the progress line before the error
                    raise
            finally:
                knowledge.close()
        finally:
            vectors.close()
    finally:
        memory.close()
        close = getattr(embedder, "close", None)
        if close is not None:
            close()
    caught = report.caught_up
    if as_json:
        out.write(json.dumps({**report.to_json(), "model": embedder.model_id}) + "\n")
    else:
        if err.isatty():
            err.write("\n")
        out.write(
            f"index rebuild: dropped {report.dropped['note_vectors']} note and"
            f" {report.dropped['reviewed_vectors']} reviewed vectors; embedded {caught.notes}"
            f" notes and {caught.reviewed} reviewed records of {caught.notebooks} open notebooks"
            f" with {embedder.model_id} in {report.seconds:.1f} s; pending {caught.pending}\n"
        )
    return 0 if caught.pending == 0 and caught.failed == 0 else 1


def cmd_index(args: argparse.Namespace) -> int:
    return rebuild_command(args)
