"""Retries (SPEC §2): an identical retry returns the original result byte for byte and never adds
a log entry; the same request id with another payload is always ``request_id_reused``.

Two parts:

* **In process**, through the agent's tool (``Tools.call``) on two connections, as two host
  processes would: new writes, identical retries of earlier ones (also after memory moved on,
  also with the payload written differently but meaning the same: link lists in another order,
  absent ``fields`` as ``{}``), and retries with another payload (other text, other
  ``based_on``, a change more or less, changes in another order, another op, another link).
  After every retry the notebook's version must not have moved.
* **Over HTTP with kills**: agents write to a real ``oh serve`` that is SIGKILLed at random
  moments and started again. A request that got no answer is retried identically until it is
  answered; its answer must be the one the write had (applied exactly once, whether or not it
  had landed before the kill). At the end every request is sent again, byte-compared with its
  first answer, and once more with another payload (409 ``request_id_reused``).

Finally ``verify`` checks every notebook, and the log holds exactly one entry per request id.

    python stress/retries.py --retries 100000 --kills 20

Prints the counts and exits 1 on any retry that was not answered as the original.
"""

from __future__ import annotations

import copy
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from harness import Server, Target, common_arguments, report, scratch, seed_of
from oh.services.notebooks import Notebooks
from oh.testing.lifecycle import FakeClock
from oh.testing.tools import SECRET
from oh.tools import Caller, Tools
from oh.verify import verify_store


def _serialized(result: dict[str, Any]) -> bytes:
    """What a transport sends: the result as JSON text."""
    return json.dumps(result, ensure_ascii=False, separators=(",", ":")).encode()


def new_changes(rng: random.Random, names: list[str], prefix: str) -> list[dict[str, Any]]:
    changes: list[dict[str, Any]] = []
    for index in range(rng.randint(1, 6)):
        record: dict[str, Any] = {
            "name": f"note:{prefix}-{index}",
            "text": f"{prefix} {rng.random()}",
            "depends_on": sorted(rng.sample(["lead:a", "lead:b", "lead:c", "lead:d"], k=3)),
        }
        if rng.random() < 0.5:
            record["fields"] = {"n": rng.randint(0, 99), "tags": ["x", "y"]}
        changes.append({"op": "add", "record": record})
    if names and rng.random() < 0.5:
        changes.append({"op": "replace", "record": {"name": names.pop(), "text": prefix}})
    return changes


def equivalent(rng: random.Random, arguments: dict[str, Any]) -> dict[str, Any]:
    """The same write, written differently: link lists reordered, ``fields`` absent vs {}."""
    same = copy.deepcopy(arguments)
    for change in same["changes"]:
        record = change.get("record")
        if record is None:
            continue
        rng.shuffle(record.get("depends_on", []))
        if "fields" not in record and rng.random() < 0.5:
            record["fields"] = {}
        elif record.get("fields") == {}:
            del record["fields"]
    return same


def different(rng: random.Random, arguments: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Another payload under the same request id, and what was changed."""
    other = copy.deepcopy(arguments)
    changes = other["changes"]
    kinds = ["text", "based_on", "extra change", "link", "op"]
    if len(changes) > 1:
        kinds += ["fewer changes", "order"]
    kind = rng.choice(kinds)
    first = changes[0]["record"]
    if kind == "text":
        first["text"] += "!"
    elif kind == "based_on":
        other["based_on"] += rng.choice([-1, 1]) if other["based_on"] else 1
    elif kind == "extra change":
        changes.append({"op": "add", "record": {"name": "note:extra", "text": "x"}})
    elif kind == "link":
        first["supports"] = ["lead:z"]
    elif kind == "op":
        changes[0]["op"] = "replace"
    elif kind == "fewer changes":
        changes.pop(rng.randrange(len(changes)))
    else:
        changes.reverse()
    return kind, other


# -- in process -----------------------------------------------------------------------------------


def in_process(target: Target, retries: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = FakeClock()
    stores = [target.open(), target.open()]
    tools = [Tools(store, None, SECRET, clock=clock) for store in stores]
    notebooks = Notebooks(stores[0], clock=clock)
    callers = []
    for i in range(8):
        notebook = notebooks.open("ann", "doc", f"retry-{seed}-{i}")
        callers.append(Caller(notebook.id, f"agent:{notebook.id}", f"agent:retry-{i}"))
    version = {caller.notebook_id: 0 for caller in callers}
    names: dict[str, list[str]] = {caller.notebook_id: [] for caller in callers}
    done: list[tuple[Caller, dict[str, Any], bytes]] = []
    counts = {
        "writes": 0,
        "identical": 0,
        "identical_original": 0,
        "reused": 0,
        "reused_refused": 0,
        "moved_version": 0,
    }
    variants: dict[str, int] = {}
    failures: list[str] = []
    serial = 0
    while counts["identical"] + counts["reused"] < retries:
        roll = rng.random()
        if not done or roll < 0.15:
            caller = rng.choice(callers)
            serial += 1
            arguments = {
                "based_on": version[caller.notebook_id],
                "request_id": f"r-{serial}",
                "changes": new_changes(rng, names[caller.notebook_id], f"s{serial}"),
            }
            result = rng.choice(tools).call(caller, "remember", arguments)
            if result.get("status") != "applied":
                failures.append(f"new write r-{serial}: {result}")
                continue
            version[caller.notebook_id] += 1
            names[caller.notebook_id] += [c["record"]["name"] for c in arguments["changes"][:1]]
            counts["writes"] += 1
            done.append((caller, arguments, _serialized(result)))
            continue
        caller, arguments, original = rng.choice(done)
        tool = rng.choice(tools)
        if roll < 0.75:
            counts["identical"] += 1
            result = tool.call(caller, "remember", equivalent(rng, arguments))
            if _serialized(result) == original:
                counts["identical_original"] += 1
            elif len(failures) < 20:
                failures.append(f"retry of {arguments['request_id']}: {result}")
        else:
            counts["reused"] += 1
            kind, other = different(rng, arguments)
            variants[kind] = variants.get(kind, 0) + 1
            result = tool.call(caller, "remember", other)
            if result.get("error", {}).get("code") == "request_id_reused":
                counts["reused_refused"] += 1
            elif len(failures) < 20:
                failures.append(f"{kind} under {arguments['request_id']}: {result}")
        if stores[0].notebook(caller.notebook_id).version != version[caller.notebook_id]:
            counts["moved_version"] += 1
            version[caller.notebook_id] = stores[0].notebook(caller.notebook_id).version
    verified = verify_store(stores[0])
    for store in stores:
        store.close()
    extra = verified.entries - counts["writes"]
    return {
        **counts,
        "reused_variants": variants,
        "log_entries": verified.entries,
        "extra_log_entries": extra,
        "verify_ok": verified.ok,
        "failures": failures,
        "ok": not failures
        and counts["identical_original"] == counts["identical"]
        and counts["reused_refused"] == counts["reused"]
        and counts["moved_version"] == 0
        and extra == 0
        and verified.ok,
    }


# -- over HTTP, with the server killed ------------------------------------------------------------


class Agent(threading.Thread):
    """Writes to its own notebook over HTTP until told to stop; a request the server did not
    answer (it was killed) is retried identically until it is answered."""

    def __init__(
        self, server: Server, notebook_id: str, token: str, owner: str, up: threading.Event
    ) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.notebook_id = notebook_id
        self.up = up
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30)
        self.owner = httpx.Client(headers={"Authorization": f"Bearer {owner}"}, timeout=30)
        self.stop = threading.Event()
        self.sent: list[tuple[dict[str, Any], bytes]] = []
        # Requests the kill interrupted: had the write landed before the server died?
        self.landed = 0
        self.not_landed = 0
        self.failures: list[str] = []
        self.rng = random.Random(notebook_id)

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1/notebooks/{self.notebook_id}/tools/remember"

    def post(self, arguments: dict[str, Any]) -> httpx.Response:
        """Send until answered, retrying identically across kills and restarts."""
        interrupted = False
        while True:
            try:
                if interrupted and "based_on" in arguments:
                    self.classify(arguments["based_on"])
                    interrupted = False
                return self.http.post(self.url, json=arguments)
            except httpx.TransportError:
                interrupted = True
                self.up.wait(timeout=120)
                time.sleep(0.01)

    def classify(self, based_on: int) -> None:
        notebook = f"{self.server.url}/v1/notebooks/{self.notebook_id}"
        version = self.owner.get(notebook).json()["version"]
        if version == based_on + 1:
            self.landed += 1
        else:
            self.not_landed += 1

    def run(self) -> None:
        version = 0
        names: list[str] = []
        while not self.stop.is_set():
            arguments = {
                "based_on": version,
                "request_id": f"h-{len(self.sent)}",
                "changes": new_changes(self.rng, names, f"h{len(self.sent)}"),
            }
            answer = self.post(arguments)
            body = answer.json()
            written = [w["name"] for w in body.get("written") or []]
            wanted = [c["record"]["name"] for c in arguments["changes"]]
            if (
                answer.status_code != 200
                or body.get("status") != "applied"
                or body.get("version") != version + 1
                or written != wanted
            ):
                self.failures.append(f"{arguments['request_id']}: {answer.status_code} {body}")
                return
            names.append(wanted[0])
            version += 1
            self.sent.append((arguments, answer.content))


def over_http(directory: Path, kills: int, seed: int, agents: int = 4) -> dict[str, Any]:
    rng = random.Random(seed)
    server = Server(directory / "data").start()
    up = threading.Event()
    up.set()
    try:
        owner_token = server.owner_token("ann")
        owner = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {owner_token}"}, timeout=30
        )
        owner.put("/v1/documents/retry-doc")
        workers = []
        for i in range(agents):
            opened = owner.post("/v1/documents/retry-doc/notebooks", json={"run": f"h-{i}"}).json()
            notebook_id, token = opened["notebook"]["id"], opened["agent_token"]
            workers.append(Agent(server, notebook_id, token, owner_token, up))
        for worker in workers:
            worker.start()
        for _ in range(kills):
            time.sleep(rng.uniform(0.05, 0.6))
            up.clear()
            server.kill()
            server.start()
            up.set()
        time.sleep(0.2)
        for worker in workers:
            worker.stop.set()
        for worker in workers:
            worker.join(timeout=120)
        counts = {"requests": 0, "resent_identical": 0, "byte_identical": 0, "reused_refused": 0}
        failures = [f for worker in workers for f in worker.failures]
        for worker in workers:
            for arguments, original in worker.sent:
                counts["requests"] += 1
                again = worker.post(arguments)
                counts["resent_identical"] += 1
                if again.status_code == 200 and again.content == original:
                    counts["byte_identical"] += 1
                elif len(failures) < 20:
                    failures.append(f"resend of {arguments['request_id']}: {again.text}")
                _, other = different(rng, arguments)
                refused = worker.post(other)
                code = refused.json().get("error", {}).get("code")
                if refused.status_code == 409 and code == "request_id_reused":
                    counts["reused_refused"] += 1
                elif len(failures) < 20:
                    failures.append(f"other payload under {arguments['request_id']}: {code}")
        landed = sum(worker.landed for worker in workers)
        not_landed = sum(worker.not_landed for worker in workers)
    finally:
        server.stop()
    from oh.config import Locations, open_memory_store

    store = open_memory_store(Locations(directory / "data"))
    try:
        verified = verify_store(store)
        entries = verified.entries
    finally:
        store.close()
    extra = entries - counts["requests"]
    return {
        "kills": kills,
        **counts,
        "interrupted_landed_before_kill": landed,
        "interrupted_not_landed": not_landed,
        "log_entries": entries,
        "extra_log_entries": extra,
        "verify_ok": verified.ok,
        "failures": failures,
        "ok": not failures
        and counts["byte_identical"] == counts["requests"]
        and counts["reused_refused"] == counts["requests"]
        and extra == 0
        and verified.ok,
    }


def run(directory: Path, retries: int, kills: int, seed: int) -> dict[str, Any]:
    local = in_process(Target.libsql(directory), retries, seed)
    http = over_http(directory, kills, seed)
    identical = local["identical"] + http["resent_identical"]
    original = local["identical_original"] + http["byte_identical"]
    reused = local["reused"] + http["requests"]
    refused = local["reused_refused"] + http["reused_refused"]
    extra = local["extra_log_entries"] + http["extra_log_entries"]
    return {
        "suite": "retries",
        "seed": seed,
        "in_process": local,
        "over_http_with_kills": http,
        "figure": (
            f"identical: {original}/{identical} original; request_id_reused: {refused}/{reused};"
            f" extra log entries: {extra}"
        ),
        "ok": local["ok"] and http["ok"],
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--retries", type=int, default=100_000, help="in-process retries")
    parser.add_argument("--kills", type=int, default=20, help="server kills over HTTP")
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-retries-", args.keep) as tmp:
        summary = run(tmp, args.retries, args.kills, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
