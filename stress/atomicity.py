"""Atomicity (SPEC §2: "all apply atomically, or none do"): batches of 1 to 64 changes with one
invalid change at a random position never apply partially.

Each batch is built valid against the notebook's current records, then one change at a random
position is made invalid in one of these ways, and sent through the agent's ``remember`` tool:

* refused while parsing: a bad name, text over 4,000 characters, an unknown key, an unknown op,
  no record, ``fields`` not an object or nested too deep or holding a huge integer, NaN or a
  lone surrogate, a link to itself or twice to one name, one name twice in the batch;
* refused inside the write transaction: adding a name that exists, replacing or removing one
  that does not;
* failed by the database in the middle of the transaction, after the log entry and earlier
  changes were written: a trigger (added for this run) refuses to store one record.

After each, the notebook's version, log and current records (names and digests) must be
exactly as before. Half of the time the batch is then sent again without the invalid change,
and must apply whole. ``verify`` checks everything at the end.

    python stress/atomicity.py --batches 10000
    python stress/atomicity.py --batches 2000 --postgres

Prints ``partial applies: 0`` and exits 1 otherwise.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

from harness import Target, common_arguments, postgres_target, report, scratch, seed_of
from oh.services.notebooks import Notebooks
from oh.testing.lifecycle import FakeClock
from oh.testing.tools import SECRET
from oh.tools import Caller, Tools
from oh.verify import verify_store

PARSE = {
    "bad name": lambda c, r: _record(c).update(name="Note:Bad Name"),
    "text too long": lambda c, r: _record(c).update(text="x" * 4001),
    "unknown key": lambda c, r: _record(c).update(author="mallory"),
    "unknown op": lambda c, r: c.update(op="upsert"),
    "no record": lambda c, r: c.pop("record", None) if "record" in c else c.pop("name"),
    "fields not an object": lambda c, r: _record(c).update(fields=[1, 2]),
    "fields too deep": lambda c, r: _record(c).update(fields=_deep(40)),
    "huge integer": lambda c, r: _record(c).update(fields={"n": 2**60}),
    "NaN": lambda c, r: _record(c).update(fields={"x": float("nan")}),
    "lone surrogate": lambda c, r: _record(c).update(text="ok \ud800 ok"),
    "link to itself": lambda c, r: _record(c).update(depends_on=[_record(c)["name"]]),
    "a link twice": lambda c, r: _record(c).update(supports=["lead:a", "lead:a"]),
}
EXPECTED = {
    **dict.fromkeys(PARSE, "invalid_argument"),
    "a name twice": "invalid_argument",
    "add existing": "already_exists",
    "replace missing": "not_found",
    "remove missing": "not_found",
    "database fails mid-transaction": "storage_unavailable",
}
POISON = "note:poison-"


def _record(change: dict[str, Any]) -> dict[str, Any]:
    """The change's record, turning a remove into an add first."""
    if "record" not in change:
        name = change.pop("name")
        change.update(op="add", record={"name": name.replace("note:", "note:re-"), "text": "t"})
    record: dict[str, Any] = change["record"]
    return record


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"d": value}
    return value


def install_poison(target: Target) -> None:
    """A trigger that makes storing one record fail inside the write transaction."""
    if target.kind == "postgres":
        target.execute(
            "CREATE FUNCTION stress_poison() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$"
        )
        target.execute(
            "CREATE TRIGGER stress_poison BEFORE INSERT ON records FOR EACH ROW"
            f" WHEN (NEW.name LIKE '{POISON}%') EXECUTE FUNCTION stress_poison()"
        )
    else:
        target.execute(
            f"CREATE TRIGGER stress_poison BEFORE INSERT ON records WHEN NEW.name LIKE '{POISON}%'"
            " BEGIN SELECT RAISE(ABORT, 'injected failure'); END"
        )


def valid_batch(rng: random.Random, current: dict[str, str], serial: int) -> list[dict[str, Any]]:
    size = rng.randint(1, rng.choice([4, 16, 64]))
    existing = sorted(current)
    rng.shuffle(existing)
    changes: list[dict[str, Any]] = []
    for index in range(size):
        roll = rng.random()
        if existing and roll < 0.3:
            name = existing.pop()
            changes.append({"op": "replace", "record": {"name": name, "text": f"v{serial}"}})
        elif existing and roll < 0.45:
            changes.append({"op": "remove", "name": existing.pop()})
        else:
            record = {"name": f"note:b{serial}-{index}", "text": f"batch {serial} #{index}"}
            changes.append({"op": "add", "record": record})
    return changes


def spoil(
    rng: random.Random, changes: list[dict[str, Any]], current: dict[str, str], serial: int
) -> tuple[str, int, list[dict[str, Any]]]:
    """The batch with one change at a random position made invalid: how, where, and it."""
    bad = copy.deepcopy(changes)
    position = rng.randrange(len(bad))
    kinds = [*PARSE, "replace missing", "remove missing", "database fails mid-transaction"]
    if len(bad) > 1:
        kinds.append("a name twice")
    absent_from_batch = set(current) - {c.get("name") or c["record"]["name"] for c in bad}
    if absent_from_batch:
        kinds.append("add existing")
    kind = rng.choice(kinds)
    change = bad[position]
    if kind in PARSE:
        PARSE[kind](change, rng)
    elif kind == "a name twice":
        other = bad[(position + rng.randrange(1, len(bad))) % len(bad)]
        twin = other.get("name") or other["record"]["name"]
        bad[position] = {"op": "replace", "record": {"name": twin, "text": "twin"}}
    elif kind == "add existing":
        name = rng.choice(sorted(absent_from_batch))
        bad[position] = {"op": "add", "record": {"name": name, "text": "again"}}
    elif kind == "replace missing":
        bad[position] = {"op": "replace", "record": {"name": f"note:missing-{serial}", "text": "?"}}
    elif kind == "remove missing":
        bad[position] = {"op": "remove", "name": f"note:missing-{serial}"}
    else:
        bad[position] = {"op": "add", "record": {"name": f"{POISON}{serial}", "text": "boom"}}
    return kind, position, bad


def run(target: Target, batches: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = FakeClock()
    memory = target.open()
    install_poison(target)
    tools = Tools(memory, None, SECRET, clock=clock)
    notebooks = Notebooks(memory, clock=clock)
    partial = 0
    wrong_code: list[str] = []
    whole_failed: list[str] = []
    by_kind: dict[str, int] = {}
    positions = {"first": 0, "middle": 0, "last": 0}
    applied = 0
    caller: Caller | None = None
    current: dict[str, str] = {}
    version = 0
    try:
        for serial in range(batches):
            if caller is None or serial % 200 == 0:
                notebook = notebooks.open("ann", "doc", f"atomic-{seed}-{serial}")
                caller = Caller(notebook.id, f"agent:{notebook.id}", "agent:atomic")
                current, version = {}, 0
            changes = valid_batch(rng, current, serial)
            kind, spoiled, bad = spoil(rng, changes, current, serial)
            by_kind[kind] = by_kind.get(kind, 0) + 1
            where = "first" if spoiled == 0 else "last" if spoiled == len(bad) - 1 else "middle"
            positions[where] += 1
            arguments = {"based_on": version, "request_id": f"x-{serial}", "changes": bad}
            result = tools.call(caller, "remember", arguments)
            code = result.get("error", {}).get("code")
            if code != EXPECTED[kind] and len(wrong_code) < 20:
                wrong_code.append(f"{kind}: {result}")
            now, digests = memory.digests(caller.notebook_id)
            if now != version or dict(digests) != current:
                partial += 1
                current, version = dict(digests), now
            if rng.random() < 0.5:
                arguments = {"based_on": version, "request_id": f"ok-{serial}", "changes": changes}
                result = tools.call(caller, "remember", arguments)
                now, digests = memory.digests(caller.notebook_id)
                expected = dict(current)
                for change in changes:
                    if change["op"] == "remove":
                        expected.pop(change["name"])
                for written in result.get("written", []):
                    if written["digest"] is not None:
                        expected[written["name"]] = written["digest"]
                if (
                    result.get("status") != "applied"
                    or now != version + 1
                    or dict(digests) != (expected)
                ):
                    if len(whole_failed) < 20:
                        whole_failed.append(f"batch {serial}: {result}")
                else:
                    applied += 1
                current, version = dict(digests), now
        verified = verify_store(memory)
    finally:
        memory.close()
    ok = partial == 0 and not wrong_code and not whole_failed and verified.ok
    return {
        "suite": "atomicity",
        "backend": target.kind,
        "seed": seed,
        "batches": batches,
        "partial_applies": partial,
        "wrong_error_codes": len(wrong_code),
        "valid_batches_applied_whole": applied,
        "valid_batches_not_applied_whole": len(whole_failed),
        "by_kind": by_kind,
        "invalid_position": positions,
        "verify_ok": verified.ok,
        "examples": (wrong_code + whole_failed)[:10],
        "figure": f"partial applies: {partial} of {batches}",
        "ok": ok,
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--batches", type=int, default=10_000)
    parser.add_argument("--postgres", action="store_true", help="on a throwaway PostgreSQL")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    if args.postgres:
        with postgres_target() as target:
            summary = run(target, args.batches, seed)
    else:
        with scratch("oh-atomic-", args.keep) as tmp:
            summary = run(Target.libsql(tmp), args.batches, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
