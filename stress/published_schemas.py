"""The published schemas are the enforced schemas: schemathesis against ``/openapi.json``.

A real ``oh serve`` (embedded backend, recall in shadow mode) is fuzzed by schemathesis with
every check it has (``--checks all``: no server error, statuses, content types, headers and
response bodies as documented, schema-valid requests accepted, schema-invalid requests refused,
undeclared methods answered 405, authentication required where declared, ...), in positive and
in negative mode, as an owner (documents, notebooks, knowledge, operations) and as an agent (the
tools). The hooks in ``schemathesis_hooks.py`` supply, to positive cases only, what JSON Schema
cannot say (a record's kind equals its name's prefix, a real explain token, ...). The figure is
the number of failures of any kind; the target is 0.

    python stress/published_schemas.py --examples 200 --seed 11
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import httpx

from harness import STRESS, Server, common_arguments, report, scratch, seed_of

ROLES = {
    "owner": "^(documents|notebooks|knowledge|operations)$",
    "agent": "^tools$",
}
MODES = ("positive", "negative")


def setup(server: Server) -> dict[str, Any]:
    """An owner with a document, a notebook holding three notes, and a pending proposal."""
    owner = server.owner_token("ann")
    http = httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {owner}"}, timeout=30
    )
    http.put("/v1/documents/fuzz-doc").raise_for_status()
    # Two notebooks of the fuzzed owner, so a listing one a page long has a cursor to go on.
    for run in ("fuzz-1", "fuzz-2"):
        http.post("/v1/documents/fuzz-doc/notebooks", json={"run": run}).raise_for_status()
    # The agent's notebook belongs to another owner: the owner routes, fuzzed first with ids
    # they find in listings, may forget every notebook of theirs, and must not forget this one.
    keeper = server.owner_token("agents-owner")
    kept = {"Authorization": f"Bearer {keeper}"}
    httpx.put(f"{server.url}/v1/documents/agent-doc", headers=kept).raise_for_status()
    opened = httpx.post(
        f"{server.url}/v1/documents/agent-doc/notebooks", json={"run": "fuzz"}, headers=kept
    ).json()
    agent, notebook = opened["agent_token"], opened["notebook"]["id"]
    written = httpx.post(
        f"{server.url}/v1/notebooks/{notebook}/tools/remember",
        json={
            "based_on": 0,
            "request_id": "fuzz-setup",
            "changes": [
                {"op": "add", "record": {"name": f"note:{n}", "text": f"note {n}"}}
                for n in ("a", "b", "c")
            ],
        },
        headers={"Authorization": f"Bearer {agent}"},
        timeout=30,
    )
    written.raise_for_status()
    proposal = http.post(
        "/v1/knowledge/proposals",
        json={
            "record": {"name": "finding:p", "text": "p"},
            "source": {"document": "d", "passage": "p", "locator": "p. 1"},
        },
    ).json()
    return {
        "owner": owner,
        "agent": agent,
        "notebook": notebook,
        "proposal": proposal["proposal_id"],
        "proposal_name": "finding:p",
    }


def _failures(junit: Path) -> list[str]:
    if not junit.exists():
        return ["no report was written"]
    found = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for failure in (*case.findall("failure"), *case.findall("error")):
            text = (failure.get("message") or failure.text or "").strip()
            found.append(f"{case.get('name')}: {text[:600]}")
    return found


def fuzz(
    server: Server,
    world: dict[str, Any],
    who: str,
    mode: str,
    examples: int,
    seed: int,
    directory: Path,
    phases: str,
) -> dict[str, Any]:
    junit = directory / f"schemathesis-{who}-{mode}.xml"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(STRESS), os.environ.get("PYTHONPATH", "")]),
        "SCHEMATHESIS_HOOKS": "schemathesis_hooks",
        "OH_FUZZ_URL": server.url,
        "OH_FUZZ_AGENT": world["agent"],
        "OH_FUZZ_OWNER": world["owner"],
        "OH_FUZZ_NOTEBOOK": world["notebook"],
        "OH_FUZZ_PROPOSAL": world["proposal"],
        "OH_FUZZ_PROPOSAL_NAME": world["proposal_name"],
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "schemathesis"),
            "--config-file",
            str(STRESS / "schemathesis.toml"),
            "--no-color",
            "run",
            f"{server.url}/openapi.json",
            "-H",
            f"Authorization: Bearer {world[who]}",
            "--mode",
            mode,
            "--checks",
            "all",
            "-n",
            str(examples),
            "--seed",
            str(seed),
            "--phases",
            phases,
            "--workers",
            "1",
            "--include-tag-regex",
            ROLES[who],
            "--exclude-path",
            "/v1/notebooks/{notebook_id}/events",
            "--report",
            "junit",
            "--report-junit-path",
            str(junit),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=False,
    )
    generated = re.findall(r"(\d+) generated", done.stdout)
    failures = _failures(junit)
    if done.returncode != 0 and not failures:
        failures = [done.stdout[-3000:] + done.stderr[-2000:]]
    # What schemathesis printed about each failure (status, body, how to reproduce it): the
    # report names a failure, the printed section says what it was.
    printed = done.stdout.partition("FAILURES")[2].partition("SUMMARY")[0].strip()
    return {
        "cases": int(generated[-1]) if generated else 0,
        "failures": failures,
        "details": printed[:6000] if failures else "",
        "summary": [line for line in done.stdout.splitlines() if "generated" in line][-1:],
    }


def run(
    directory: Path,
    examples: int,
    seed: int,
    *,
    phases: str = "examples,coverage,fuzzing",
    server: Server | None = None,
) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(Server(directory / "data", recall="shadow"))
        world = setup(server)
        runs = {
            f"{who} {mode}": fuzz(server, world, who, mode, examples, seed, directory, phases)
            for who in ROLES
            for mode in MODES
        }
        alive = httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        log = server.output()
    failures = [f"{name}: {failure}" for name, r in runs.items() for failure in r["failures"]]
    cases = sum(r["cases"] for r in runs.values())
    caught = log.count("unexpected error") + log.count("failed unexpectedly")
    return {
        "suite": "published schemas",
        "seed": seed,
        "cases": {name: r["cases"] for name, r in runs.items()},
        "failures": failures,
        "details": {name: r["details"] for name, r in runs.items() if r["details"]},
        "caught_by_the_catch_all": caught,
        "server_alive_after": alive,
        "figure": f"failures: {len(failures)} of {cases} cases (positive and negative,"
        " owner and agent)",
        "ok": not failures and caught == 0 and alive and all(r["cases"] for r in runs.values()),
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--phases", default="examples,coverage,fuzzing")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-schemas-", args.keep) as tmp:
        summary = run(tmp, args.examples, seed, phases=args.phases)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
