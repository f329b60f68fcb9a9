"""Every reliability and security suite at full size, one after the other, and one summary
table (``make stress``). About 17 minutes on 2 cores.

Each suite is its own script under stress/ (its docstring says what it proves and how); this
runs each as a child process with ``--json``, collects its figure, and prints the table with
the exact command that produced each figure. ``--quick`` runs the sizes CI uses instead.

    python stress/run_all.py                     # the full runs
    python stress/run_all.py --quick             # small sizes, a minute or two
    python stress/run_all.py --only crash tamper --markdown table.md

Exits 1 if any suite failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

STRESS = Path(__file__).resolve().parent

# name, backend, script, full arguments, quick arguments
SUITES: list[tuple[str, str, str, list[str], list[str]]] = [
    ("crash", "libsql", "crash_safety.py", ["--runs", "200"], ["--runs", "10"]),
    (
        "crash (8 writers)",
        "libsql",
        "crash_safety.py",
        ["--runs", "200", "--writers", "8"],
        ["--runs", "10", "--writers", "8"],
    ),
    (
        "crash",
        "postgres",
        "crash_safety.py",
        ["--runs", "50", "--postgres"],
        ["--runs", "4", "--postgres"],
    ),
    ("concurrency", "libsql", "contested_writes.py", ["--writes", "50000"], ["--writes", "2000"]),
    (
        "concurrency",
        "postgres",
        "contested_writes.py",
        ["--writes", "10000", "--postgres"],
        ["--writes", "1000", "--postgres"],
    ),
    (
        "retries",
        "libsql",
        "retries.py",
        ["--retries", "100000", "--kills", "20"],
        ["--retries", "2000", "--kills", "2"],
    ),
    ("atomicity", "libsql", "atomicity.py", ["--batches", "10000"], ["--batches", "500"]),
    (
        "three servers",
        "postgres",
        "three_servers.py",
        ["--writes", "200", "--races", "50", "--durable"],
        ["--writes", "20", "--races", "5"],
    ),
    (
        "atomicity",
        "postgres",
        "atomicity.py",
        ["--batches", "2000", "--postgres"],
        ["--batches", "200", "--postgres"],
    ),
    ("purge races", "libsql", "purge_race.py", ["--races", "10000"], ["--races", "200"]),
    ("authorization", "libsql", "authz_matrix.py", [], []),
    ("authorization", "libsql + postgres purge", "authz_matrix.py", ["--postgres"], ["--postgres"]),
    (
        "malformed input",
        "libsql",
        "malformed_input.py",
        ["--examples", "20000"],
        ["--examples", "300"],
    ),
    ("parity", "libsql", "parity.py", ["--calls", "5000"], ["--calls", "200"]),
    (
        "published schemas",
        "libsql",
        "published_schemas.py",
        ["--examples", "200"],
        ["--examples", "5", "--phases", "coverage,fuzzing"],
    ),
    ("tokens", "libsql", "tokens.py", ["--forgeries", "50000"], ["--forgeries", "2000"]),
    ("tamper", "libsql", "tamper.py", ["--trials", "10000"], ["--trials", "300"]),
    (
        "tamper --keys",
        "libsql",
        "tamper.py",
        ["--keys", "--trials", "2000"],
        ["--keys", "--trials", "100"],
    ),
    (
        "tamper",
        "postgres",
        "tamper.py",
        ["--trials", "2000", "--postgres"],
        ["--trials", "100", "--postgres"],
    ),
    ("forgetting", "libsql", "forgetting.py", ["--notebooks", "200"], ["--notebooks", "10"]),
    (
        "forgetting",
        "postgres",
        "forgetting.py",
        ["--notebooks", "40", "--postgres"],
        ["--notebooks", "6", "--postgres"],
    ),
    (
        "forgetting",
        "postgres, no ANALYZE",
        "forgetting.py",
        ["--notebooks", "40", "--postgres", "--no-analyze"],
        ["--notebooks", "6", "--postgres", "--no-analyze"],
    ),
    ("backups", "libsql", "backups.py", ["--notebooks", "60"], ["--notebooks", "6"]),
    (
        "backups",
        "postgres",
        "backups.py",
        ["--notebooks", "30", "--postgres"],
        ["--notebooks", "6", "--postgres"],
    ),
    ("I/O faults", "libsql", "io_faults.py", ["--cycles", "100"], ["--cycles", "6"]),
    (
        "I/O faults",
        "postgres",
        "io_faults.py",
        ["--cycles", "10", "--postgres"],
        ["--cycles", "2", "--postgres"],
    ),
]


def run_one(
    script: str, arguments: list[str], seed: int | None
) -> tuple[dict[str, Any], float, str]:
    if seed is not None and script != "purge_race.py":  # the older script takes no seed
        arguments = [*arguments, "--seed", str(seed)]
    command = [sys.executable, str(STRESS / script), *arguments, "--json"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    shown = shlex.join(["python", f"stress/{script}", *arguments])
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        tail = (done.stderr or done.stdout)[-1500:]
        return {"figure": f"did not finish: {tail}", "ok": False}, seconds, shown
    summary = json.loads(lines[-1])
    if script == "purge_race.py":  # the older script reports its own way
        summary["figure"] = (
            f"resurrections: {summary['resurrections']} of {summary['races']} notebooks"
        )
        summary["ok"] = summary["resurrections"] == 0 and done.returncode == 0
    summary["ok"] = bool(summary.get("ok")) and done.returncode == 0
    return summary, seconds, shown


def table(rows: list[tuple[str, str, str, bool, float, str]]) -> str:
    lines = [
        "| suite | backend | figure | ok | seconds | command |",
        "|---|---|---|---|---|---|",
    ]
    for name, backend, figure, ok, seconds, command in rows:
        mark = "yes" if ok else "**NO**"
        figure = figure.replace("|", "\\|")
        lines.append(f"| {name} | {backend} | {figure} | {mark} | {seconds:.0f} | `{command}` |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the small sizes CI uses")
    parser.add_argument("--only", nargs="*", default=None, help="suite names (first word)")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--markdown", type=Path, default=None, help="also write the table here")
    parser.add_argument("--details", type=Path, default=None, help="write every summary (JSON)")
    args = parser.parse_args()
    rows = []
    details = []
    started = time.monotonic()
    for name, backend, script, full, quick in SUITES:
        if args.only and name.split()[0] not in args.only:
            continue
        if args.no_postgres and backend.startswith("postgres"):
            continue
        print(f"-- {name} ({backend}) ...", flush=True)
        summary, seconds, command = run_one(script, quick if args.quick else full, args.seed)
        print(f"   {summary['figure']}  [{seconds:.0f} s]", flush=True)
        rows.append((name, backend, str(summary["figure"]), summary["ok"], seconds, command))
        details.append({"suite": name, "backend": backend, "command": command, **summary})
    total = time.monotonic() - started
    text = table(rows)
    print()
    print(text)
    print(f"\n{sum(1 for r in rows if r[3])}/{len(rows)} suites ok in {total / 60:.1f} minutes")
    if args.markdown is not None:
        args.markdown.write_text(text + "\n")
    if args.details is not None:
        args.details.write_text(json.dumps(details, indent=2, default=str) + "\n")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
