"""The newcomer's path, timed: from a built wheel to a note an agent wrote, seen in the panel.

What a user who arrives with the wheel does, each step timed on this machine:

1. install: a fresh virtual environment, the wheel with the ``server`` extra (pip, from the
   package registry this machine has), against the baseline of the same fresh environment with
   nothing installed in it;
2. first server: ``oh serve`` on a new data directory until ``/healthz`` answers (it makes the
   databases and the master key), against the baseline of that environment's Python starting
   and exiting;
3. first note: ``oh token create``, ``oh document put``, ``oh notebook open --json``, one
   ``remember`` over HTTP with the agent token, and the note on the panel's notebook page after
   signing in with the owner token.

Run from the repository root (it builds the wheel first, with ``build`` from the test extra)::

    python bench/bench_first_contact.py          # prints the table
    python bench/bench_first_contact.py --json

No figure is asserted on: the install depends on the registry's speed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from oh.testing.served import Served, remember_over_http

ROOT = Path(__file__).resolve().parents[1]


def _timed(argv: list[str], **kwargs: Any) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    return time.perf_counter() - started, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="oh-first-contact-"))
    try:
        figures = run(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"{'step':<56} {'seconds':>8} {'baseline':>9}")
    for name, (seconds, baseline) in figures.items():
        shown = "" if baseline is None else f"{baseline:9.2f}"
        print(f"{name:<56} {seconds:8.2f} {shown:>9}")


def run(work: Path) -> dict[str, tuple[float, float | None]]:
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv*", ".git", "__pycache__"))
    _timed([sys.executable, "-m", "build", "--wheel", "--outdir", str(work / "dist"), str(source)])
    [wheel] = (work / "dist").glob("oh_memory-*.whl")
    empty, _ = _timed([sys.executable, "-m", "venv", str(work / "empty")])
    install = 0.0
    seconds, _ = _timed([sys.executable, "-m", "venv", str(work / "venv")])
    install += seconds
    pip = [str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "-q"]
    seconds, _ = _timed([*pip, "--disable-pip-version-check", f"{wheel}[server]"])
    install += seconds
    oh = str(work / "venv" / "bin" / "oh")
    start_baseline, _ = _timed([str(work / "venv" / "bin" / "python"), "-c", "pass"])
    started = time.perf_counter()
    # The installed oh, not this checkout's: ``Served`` runs the command it is given.
    with Served(work / "data", command=[oh]) as served:
        first_server = time.perf_counter() - started
        started = time.perf_counter()
        token = served.owner_token("you")
        opened = served.open_notebook("you", "report-42", "r-1")
        notebook_id = opened["notebook"]["id"]
        remember_over_http(
            served.url, opened["agent_token"], notebook_id, "lead:first-note", "It works."
        )
        with httpx.Client(base_url=served.url, timeout=30, follow_redirects=True) as browser:
            form = browser.get("/panel/login").text
            [csrf] = re.findall(r'name="csrf" value="([^"]+)"', form)
            browser.post("/panel/login", data={"csrf": csrf, "token": token, "next": "/"})
            page = browser.get(f"/panel/notebooks/{notebook_id}").text
        assert "lead:first-note" in page
        first_note = time.perf_counter() - started
    return {
        "install: fresh venv + the wheel with [server]": (install, empty),
        "first server: oh serve until /healthz": (first_server, start_baseline),
        "first note: token, document, notebook, remember, panel": (first_note, None),
    }


if __name__ == "__main__":
    main()
