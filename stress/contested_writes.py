"""Concurrency (SPEC §2, §10): writer processes contest the same notebooks, and a checker reads
the recorded history afterwards.

Each writer reads a notebook's version and writes on it: a new note of its own, and half of the
time a new text for the notebook's one shared note (``note:hot``). Every call is recorded with
the monotonic clock before the read and after the answer (one clock for all processes). The
checker then confirms, per notebook:

* applied versions are exactly 1..N, each once (no two writers got the same version);
* every acknowledged write is the log entry at its version, with its request id and changes,
  its note is current, and ``note:hot`` holds the text of the last write that set it;
* every refusal reported a version newer than the one the call was based on, that some write
  had started to make before the refusal came back, and not older than any write acknowledged
  before the call began (the then-current version);
* no call read a version older than one acknowledged before it started;
* an applied write at version v+1 did not finish before the one at v started;
* a call that failed (e.g. ``storage_unavailable``) wrote nothing; ``verify`` finds every
  notebook sound.

    python stress/contested_writes.py --writes 50000               # 16 writers, embedded
    python stress/contested_writes.py --writes 10000 --postgres    # throwaway PostgreSQL

Prints ``lost updates: 0`` (plus the other violations, each counted) and exits 1 otherwise.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness import (
    Target,
    common_arguments,
    postgres_target,
    report,
    scratch,
    script_command,
    seed_of,
)
from oh.core.changes import parse_changes
from oh.errors import OhError
from oh.testing.memory_store import T0, open_notebook
from oh.verify import verify_notebook

HOT = "note:hot"


def _changes(name: str, hot: str | None) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = [{"op": "add", "record": {"name": name, "text": name}}]
    if hot is not None:
        changes.append({"op": "replace", "record": {"name": HOT, "text": hot}})
    return changes


def writer(target: Target, notebooks: list[str], worker: int, calls: int, start_at: float) -> None:
    """Make ``calls`` read-then-write calls; one JSON line per call on standard output."""
    rng = random.Random(worker)
    store = target.open(application_name=f"oh-contest-{worker}", max_size=1)
    lines = []
    while time.monotonic() < start_at:  # the start, on the one clock all processes share
        time.sleep(0.001)
    for i in range(calls):
        notebook_id = rng.choice(notebooks)
        rid = f"w{worker}-{i}"
        hot = rid if rng.random() < 0.5 else None
        began = time.monotonic_ns()
        record: dict[str, Any] = {"nb": notebook_id, "rid": rid, "hot": hot, "t0": began}
        try:
            based_on = store.notebook(notebook_id).version
            record["based_on"] = based_on
            result = store.remember(
                notebook_id,
                based_on=based_on,
                request_id=rid,
                changes=parse_changes(_changes(f"note:{rid}", hot)),
                author=f"agent:w{worker}",
                now=T0,
            )
            record["result"] = result.to_json()
        except OhError as exc:
            record["error"] = exc.code
        record["t1"] = time.monotonic_ns()
        lines.append(json.dumps(record))
    store.close()
    sys.stdout.write("\n".join(lines) + "\n")


def check(target: Target, notebooks: list[str], history: list[dict[str, Any]]) -> dict[str, Any]:
    violations: dict[str, list[str]] = {
        "lost_updates": [],
        "duplicate_versions": [],
        "bad_refusals": [],
        "stale_reads": [],
        "out_of_order": [],
        "failed_but_written": [],
        "verify": [],
    }
    store = target.open(application_name="oh-contest-check")
    try:
        for notebook_id in notebooks:
            calls = [c for c in history if c["nb"] == notebook_id]
            applied = sorted(
                (c for c in calls if c.get("result", {}).get("status") == "applied"),
                key=lambda c: c["result"]["version"],
            )
            versions = [c["result"]["version"] for c in applied]
            if len(set(versions)) != len(versions):
                violations["duplicate_versions"].append(f"{notebook_id}: a version applied twice")
            if versions != list(range(1, len(versions) + 1)):
                violations["duplicate_versions"].append(f"{notebook_id}: versions not 1..N")
            log = {entry.version: entry for entry in store.log(notebook_id)}
            notebook = store.notebook(notebook_id)
            if notebook.version != len(applied) or len(log) != len(applied):
                violations["lost_updates"].append(
                    f"{notebook_id}: {len(applied)} applied, log holds {len(log)},"
                    f" version {notebook.version}"
                )
            current = {record.name: record for record in store.records(notebook_id)}
            for call in applied:
                entry = log.get(call["result"]["version"])
                written = [[w["name"], w["digest"]] for w in call["result"]["written"]]
                if (
                    entry is None
                    or entry.request_id != call["rid"]
                    or [[c.name, c.digest] for c in entry.changes] != written
                    or f"note:{call['rid']}" not in current
                ):
                    violations["lost_updates"].append(f"{notebook_id}: {call['rid']} is not there")
            last_hot = next((c["hot"] for c in reversed(applied) if c["hot"] is not None), "hot")
            hot = current.get(HOT)
            if hot is None or json.loads(hot.content)["text"] != last_hot:
                violations["lost_updates"].append(f"{notebook_id}: note:hot lost its last text")
            by_version = {c["result"]["version"]: c for c in applied}
            for before, after in itertools.pairwise(applied):
                if after["t1"] < before["t0"]:
                    violations["out_of_order"].append(f"{after['rid']} finished before {before}")
            # The newest version acknowledged before a moment: acknowledgement times in order,
            # with the running maximum of the versions acknowledged up to each.
            acked = sorted((c["t1"], c["result"]["version"]) for c in applied)
            times = [t1 for t1, _ in acked]
            newest = list(itertools.accumulate((v for _, v in acked), max))
            for call in calls:
                index = bisect.bisect_left(times, call["t0"])
                newest_before = newest[index - 1] if index else 0
                if "based_on" in call and call["based_on"] < newest_before:
                    violations["stale_reads"].append(
                        f"{call['rid']} read {call['based_on']} after {newest_before} was acked"
                    )
                result = call.get("result")
                if result is not None and result["status"] == "refused":
                    now = result["current_version"]
                    maker = by_version.get(now)
                    if (
                        now <= call["based_on"]
                        or maker is None
                        or maker["t0"] > call["t1"]
                        or now < newest_before
                    ):
                        violations["bad_refusals"].append(
                            f"{call['rid']} based on {call['based_on']} was told {now}"
                        )
                if "error" in call and any(e.request_id == call["rid"] for e in log.values()):
                    violations["failed_but_written"].append(call["rid"])
            report = verify_notebook(store, notebook_id)
            violations["verify"] += [f"{p.what}: {p.detail}" for p in report.problems]
    finally:
        store.close()
    return violations


def run(
    target: Target, writes: int, seed: int, *, writers: int = 16, notebooks: int = 4
) -> dict[str, Any]:
    store = target.open(application_name="oh-contest-setup")
    setup: list[dict[str, Any]] = []
    try:
        ids = [open_notebook(store, run=f"contest-{seed}-{i}") for i in range(notebooks)]
        for notebook_id in ids:
            # Version 1 of every notebook: the shared note, and a note of its own like any
            # other write, so the checker treats it as one more call of the history.
            result = store.remember(
                notebook_id,
                based_on=0,
                request_id="setup",
                changes=parse_changes(
                    [
                        *_changes("note:setup", None),
                        {"op": "add", "record": {"name": HOT, "text": "hot"}},
                    ]
                ),
                author="agent:setup",
                now=T0,
            )
            setup.append(
                {"nb": notebook_id, "rid": "setup", "hot": "hot", "t0": 0, "t1": 0}
                | {"based_on": 0, "result": result.to_json()}
            )
    finally:
        store.close()
    per_writer = [writes // writers + (1 if w < writes % writers else 0) for w in range(writers)]
    start_at = time.monotonic() + 1.0 + writers * 0.15
    processes = [
        subprocess.Popen(
            script_command(
                "contested_writes.py",
                "--writer",
                json.dumps(target.to_json()),
                ",".join(ids),
                str(seed * 1000 + w),
                str(per_writer[w]),
                str(start_at),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(writers)
    ]
    history: list[dict[str, Any]] = []
    crashed = []
    for process in processes:
        out, err = process.communicate()
        if process.returncode != 0:
            crashed.append(err[-2000:])
        history += [json.loads(line) for line in out.splitlines() if line]
    elapsed = time.monotonic() - start_at
    violations = check(target, ids, setup + history)
    applied = sum(1 for c in history if c.get("result", {}).get("status") == "applied")
    refused = sum(1 for c in history if c.get("result", {}).get("status") == "refused")
    errors = sum(1 for c in history if "error" in c)
    counts = {key: len(found) for key, found in violations.items()}
    ok = not crashed and len(history) == writes and not any(counts.values())
    return {
        "suite": "concurrency",
        "backend": target.kind,
        "seed": seed,
        "writers": writers,
        "notebooks": notebooks,
        "writes": len(history),
        "applied": applied,
        "refused_stale": refused,
        "errors": errors,
        "writes_per_second": round(len(history) / max(elapsed, 1e-9)),
        **{key.replace("_", " "): value for key, value in counts.items()},
        "examples": {key: found[:3] for key, found in violations.items() if found},
        "crashed_writers": crashed[:2],
        "figure": f"lost updates: {counts['lost_updates']}",
        "ok": ok,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        _, _, target, ids, worker, calls, start_at = sys.argv
        writer(Target.from_json(target), ids.split(","), int(worker), int(calls), float(start_at))
        return 0
    parser = common_arguments(__doc__)
    parser.add_argument("--writes", type=int, default=50_000)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--notebooks", type=int, default=4)
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    options = {"writers": args.writers, "notebooks": args.notebooks}
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.writes, seed, **options)
    else:
        with scratch("oh-contest-", args.keep) as tmp:
            summary = run(Target.libsql(tmp), args.writes, seed, **options)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
