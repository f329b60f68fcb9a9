"""Crash safety (SPEC §2: "a write that is acknowledged is durable"): a writer process is killed
with SIGKILL at a random moment while it writes batches of 1 to 64 changes; after each kill the
parent reopens the database and checks it.

The writer announces each call on its standard output before making it (request id, based_on,
the changes and the digests they will have) and acknowledges it after ``remember`` returned,
one flushed line each, so the parent knows exactly what was acknowledged and what was in
flight when the process died. After each kill:

* every acknowledged call is in the log at its version, with exactly its changes;
* the call in flight (if any) is there with all of its changes or not at all;
* nothing else was written, and ``verify`` finds the notebook sound (chain, versions,
  digests, current records equal to the replay);
* retrying the call that was in flight, identically, returns the original result if it had
  been applied and applies it otherwise: either way it is in the log exactly once.

With ``--writers N`` the writer process runs N threads, each on its own notebook, through one
store, so their calls share flushes (group commit); each notebook is checked as above, and up to
N calls (one per notebook) may be in flight at the kill.

Runs go on in a few notebooks of one database, so later runs write over what earlier kills
left behind. On PostgreSQL the writer is the client process; the parent waits until the
server has finished with the killed connection before it looks.

    python stress/crash_safety.py --runs 200                 # embedded libSQL
    python stress/crash_safety.py --runs 200 --writers 8     # 8 threads, 8 notebooks, one store
    python stress/crash_safety.py --runs 50 --postgres       # a throwaway PostgreSQL cluster

Prints ``runs: N/N`` style figures and exits 1 on any failed run.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
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
from oh.core.changes import Applied, log_changes, parse_changes
from oh.testing.memory_store import T0, open_notebook
from oh.verify import verify_notebook, verify_store

AUTHOR = "agent:crash"
WORDS = ["reef", "coral", "bleaching", "survey", "2014", "récif", "珊瑚", "🐠", "ümlaut", "\u00a0"]


# -- the writer (a child process) -----------------------------------------------------------------


def _text(rng: random.Random) -> str:
    if rng.random() < 0.05:
        return "".join(rng.choice(WORDS) for _ in range(2000))[:4000]
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 60)))


def batch(
    rng: random.Random, names: set[str], prefix: str, counter: int, size: int
) -> list[dict[str, Any]]:
    """``size`` valid changes against the current ``names``: adds, replaces and removes."""
    changes: list[dict[str, Any]] = []
    existing = sorted(names)
    rng.shuffle(existing)
    for index in range(size):
        roll = rng.random()
        if existing and roll < 0.35:
            name = existing.pop()
            changes.append({"op": "replace", "record": {"name": name, "text": _text(rng)}})
        elif existing and roll < 0.5:
            changes.append({"op": "remove", "name": existing.pop()})
        else:
            record: dict[str, Any] = {"name": f"note:{prefix}-{counter}-{index}"}
            record["text"] = _text(rng)
            if rng.random() < 0.2:
                record["fields"] = {"n": rng.randint(-1000, 1000), "tags": ["a", "b"]}
            if existing and rng.random() < 0.2:
                record["depends_on"] = [existing[0]]
            changes.append({"op": "add", "record": record})
    return changes


def apply_names(names: set[str], changes: list[dict[str, Any]]) -> None:
    for change in changes:
        if change["op"] == "remove":
            names.discard(change["name"])
        else:
            names.add(change["record"]["name"])


def writer(target: Target, notebook_ids: list[str], seed: int) -> None:
    """Write batches until killed (or for a minute at most), one thread per notebook, all
    through one store (so concurrent calls share flushes: group commit), announcing and
    acknowledging each call with one flushed line on standard output."""
    out = sys.stdout
    lock = threading.Lock()

    def emit(value: dict[str, Any]) -> None:
        line = json.dumps(value) + "\n"
        with lock:
            out.write(line)
            out.flush()

    store = target.open(application_name=f"oh-crash-{seed}", max_size=len(notebook_ids))
    start = threading.Barrier(len(notebook_ids))

    def write(index: int, notebook_id: str) -> None:
        rng = random.Random(seed + index)
        names = {record.name for record in store.records(notebook_id)}
        version = store.notebook(notebook_id).version
        emit({"ready": version, "notebook": notebook_id})
        start.wait()
        deadline = time.monotonic() + 60
        counter = 0
        while time.monotonic() < deadline:
            counter += 1
            size = rng.randint(1, rng.choice([4, 16, 64]))
            raw = batch(rng, names, f"s{seed}-{index}", counter, size)
            changes = parse_changes(raw)
            request_id = f"s{seed}-{index}-{counter}"
            logged = [[c.op, c.name, c.digest] for c in log_changes(changes)]
            emit(
                {
                    "intent": request_id,
                    "notebook": notebook_id,
                    "based_on": version,
                    "changes": raw,
                    "logged": logged,
                }
            )
            result = store.remember(
                notebook_id,
                based_on=version,
                request_id=request_id,
                changes=changes,
                author=AUTHOR,
                now=T0,
            )
            emit({"ack": request_id, "notebook": notebook_id, "result": result.to_json()})
            assert isinstance(result, Applied), result  # one writer per notebook: never stale
            version = result.version
            apply_names(names, raw)

    threads = [
        threading.Thread(target=write, args=(index, notebook_id))
        for index, notebook_id in enumerate(notebook_ids)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()


def of_notebook(messages: list[dict[str, Any]], notebook_id: str) -> list[dict[str, Any]]:
    """The messages about one notebook's writer thread."""
    return [m for m in messages if m.get("notebook", notebook_id) == notebook_id]


# -- the parent -----------------------------------------------------------------------------------


def _lines(data: bytes) -> Iterator[dict[str, Any]]:
    """Complete lines only: a line cut by the kill was never followed by the call it
    announces."""
    for line in data.split(b"\n")[:-1]:
        yield json.loads(line)


def _wait_for_server(target: Target, application_name: str) -> None:
    """PostgreSQL: until the killed client's backend has finished (committed or rolled back)."""
    if target.kind != "postgres":
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rows = target.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = ?",
            (application_name,),
        )
        if rows[0][0] == 0:
            return
        time.sleep(0.01)
    raise RuntimeError(f"the server kept {application_name}'s connection")


def check_run(
    target: Target, notebook_id: str, messages: list[dict[str, Any]]
) -> tuple[list[str], str]:
    """The failures of one run, and where the kill fell."""
    failures: list[str] = []
    if not messages or "ready" not in messages[0]:
        return [], "before the writer was ready"
    start = messages[0]["ready"]
    intents = {m["intent"]: m for m in messages if "intent" in m}
    acks = {m["ack"]: m["result"] for m in messages if "ack" in m}
    in_flight = [rid for rid in intents if rid not in acks]
    store = target.open(application_name="oh-crash-check")
    try:
        entries = [entry for entry in store.log(notebook_id) if entry.version > start]
        by_request = {entry.request_id: entry for entry in entries}
        for rid, result in acks.items():
            entry = by_request.get(rid)
            if entry is None:
                failures.append(f"acknowledged {rid} is missing from the log")
                continue
            if entry.result().to_json() != result:
                failures.append(f"acknowledged {rid} differs: {entry.result()} vs {result}")
            if [[c.op, c.name, c.digest] for c in entry.changes] != intents[rid]["logged"]:
                failures.append(f"acknowledged {rid} holds other changes than it was sent")
        if len(in_flight) > 1:
            failures.append(f"more than one call in flight: {in_flight}")
        where = "between two calls"
        for rid in in_flight:
            entry = by_request.get(rid)
            if entry is None:
                where = "in flight, absent"
            else:
                where = "in flight, present"
                logged = [[c.op, c.name, c.digest] for c in entry.changes]
                if logged != intents[rid]["logged"]:
                    failures.append(f"in-flight {rid} is partly present: {len(logged)} changes")
        stray = set(by_request) - set(intents)
        if stray:
            failures.append(f"entries nobody asked for: {sorted(stray)}")
        verified = verify_notebook(store, notebook_id)
        failures += [f"verify: {p.what}: {p.detail}" for p in verified.problems]
        # The retry a client makes after the crash: identical, and it lands exactly once.
        for rid in in_flight:
            intent = intents[rid]
            length = store.notebook(notebook_id).version
            before = by_request.get(rid)
            result = store.remember(
                notebook_id,
                based_on=intent["based_on"],
                request_id=rid,
                changes=parse_changes(intent["changes"]),
                author=AUTHOR,
                now=T0,
            )
            after = store.notebook(notebook_id).version
            if before is not None and (result != before.result() or after != length):
                failures.append(f"retry of {rid} did not return the original result")
            if before is None and (
                not isinstance(result, Applied)
                or after != length + 1
                or after != start + 1 + len(acks)
            ):
                failures.append(f"retry of {rid} did not apply once: {result}")
    finally:
        store.close()
    return failures, where


def run(
    target: Target, runs: int, seed: int, *, max_delay: float = 0.3, writers: int = 1
) -> dict[str, Any]:
    """``runs`` kills of a writer process with ``writers`` threads, each on its own notebook."""
    rng = random.Random(seed)
    store = target.open(application_name="oh-crash-setup")
    try:
        notebooks = [open_notebook(store, run=f"crash-{seed}-{i}") for i in range(writers + 3)]
    finally:
        store.close()
    passed = 0
    acknowledged = 0
    where: dict[str, int] = {}
    failures: list[str] = []
    for number in range(runs):
        chosen = rng.sample(notebooks, writers)
        child_seed = rng.getrandbits(31)
        process = subprocess.Popen(
            script_command(
                "crash_safety.py",
                "--writer",
                json.dumps(target.to_json()),
                ",".join(chosen),
                str(child_seed),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        received = bytearray()
        assert process.stdout is not None and process.stderr is not None
        stdout = process.stdout

        def drain(stream: Any = stdout, sink: bytearray = received) -> None:
            while chunk := stream.read1(65536):
                sink.extend(chunk)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        deadline = time.monotonic() + 60
        while b"\n" not in received and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0, max_delay))
        process.kill()
        process.wait()
        reader.join()
        errors = process.stderr.read().decode(errors="replace")
        _wait_for_server(target, f"oh-crash-{child_seed}")
        messages = list(_lines(bytes(received)))
        if not messages and process.returncode != -9:
            failures.append(f"run {number}: the writer failed: {errors[-2000:]}")
            continue
        problems = []
        for notebook_id in chosen:
            found, kill_point = check_run(target, notebook_id, of_notebook(messages, notebook_id))
            problems += found
            where[kill_point] = where.get(kill_point, 0) + 1
        acknowledged += sum(1 for m in messages if "ack" in m)
        if problems:
            failures += [f"run {number}: {p}" for p in problems[:5]]
        else:
            passed += 1
    store = target.open(application_name="oh-crash-final")
    try:
        final = verify_store(store)
    finally:
        store.close()
    integrity = "ok"
    if target.kind == "libsql":
        integrity = str(target.execute("PRAGMA integrity_check")[0][0])
    if not final.ok:
        failures += [f"final verify: {p.what}: {p.detail}" for p in final.problems[:5]]
    if integrity != "ok":
        failures.append(f"integrity_check: {integrity}")
    ok = passed == runs and final.ok and integrity == "ok"
    return {
        "suite": "crash",
        "backend": target.kind,
        "writers": writers,
        "seed": seed,
        "runs": runs,
        "passed": passed,
        "acknowledged_calls": acknowledged,
        "log_entries": final.entries,
        "kill_points": where,
        "integrity_check": integrity,
        "failures": failures[:20],
        "figure": f"{passed}/{runs}",
        "ok": ok,
    }


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--writer":
        writer(Target.from_json(sys.argv[2]), sys.argv[3].split(","), int(sys.argv[4]))
        return 0
    parser = common_arguments(__doc__)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--max-delay", type=float, default=0.3, help="seconds before the kill")
    parser.add_argument(
        "--writers", type=int, default=1, help="writer threads, each on its own notebook (1)"
    )
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL")
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep the files")
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.runs, seed, max_delay=args.max_delay, writers=args.writers)
    else:
        with scratch("oh-crash-", args.keep) as tmp:
            summary = run(
                Target.libsql(tmp),
                args.runs,
                seed,
                max_delay=args.max_delay,
                writers=args.writers,
            )
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
