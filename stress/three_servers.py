"""Three ``oh serve`` processes that share nothing on disk behave as one (docs/postgres.md).

Each server has a directory of its own and nothing else; they share one PostgreSQL cluster for
memory and knowledge, and a second cluster that holds only the key store (``OH_KEYS_URL``),
and every one is given the same master key (``OH_MASTER_KEY``). The purge worker is a process
of its own, with the purge role's URLs on both clusters and no master key.

What it does, and counts:

* agents write through server 1 (``clients`` writers, each on its own notebook) while they read,
  query and recall through server 2; every acknowledged write is read back through server 2
  (``lost`` must be 0);
* server 1 is killed with SIGKILL mid-write and started again; the writes it acknowledged before
  dying are among those read back;
* two agents race on one notebook from the same version, through two servers, ``races`` times:
  one is applied and the other refused with the version it lost to (``stale_wrong`` must be 0);
* another owner tries every owner route on the first owner's notebooks through every server, and
  each agent token tries another notebook (``cross_owner_reads`` must be 0);
* the owner forgets a notebook through server 3: its key is gone from the key cluster and every
  server answers ``purged``;
* a notebook whose forget time has passed is purged by the purge worker on its schedule, key
  first;
* ``oh verify`` over the three databases finds nothing wrong;
* then ``clients`` writers per server write at once through all three: ``remember_per_s``,
  against the baseline of the same run: as many connections inserting single rows of the same
  size straight into the memory cluster, one transaction each (``raw_insert_per_s``).

``--durable`` starts both clusters with PostgreSQL's durable defaults (fsync on), as the
published figures are taken; without it (CI) they run without fsync.

    python stress/three_servers.py                   # full size
    python stress/three_servers.py --writes 20 --json   # what CI runs (tests/test_reliability.py)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from harness import common_arguments, free_port, report, scratch, seed_of
from oh.keys import MasterKey
from oh.testing.postgres_cluster import (
    PostgresCluster,
    Schema,
    fresh_schema,
    roles_bootstrap,
)

FAKETIME = next(Path("/usr/lib").glob("*/faketime/libfaketime.so.1"), None)
READY_SECONDS = 60.0
PURGE_SECONDS = 60.0


class Process:
    """One ``oh`` command as its own process, with its own directory and environment."""

    def __init__(self, directory: Path, env: dict[str, str], argv: list[str]) -> None:
        self.directory = directory
        self.env = env
        self.argv = argv
        self.process: subprocess.Popen[bytes] | None = None
        self.log = directory / "log.txt"

    def start(self) -> Process:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "oh.cli", *self.argv],
                cwd=self.directory,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


class OhServer(Process):
    def __init__(self, directory: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__(directory, env, ["serve", "--port", str(self.port), "--no-purge"])

    def start(self) -> OhServer:
        super().start()
        deadline = time.monotonic() + READY_SECONDS
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            assert self.process is not None
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"oh serve did not start:\n{self.output()[-4000:]}")
            time.sleep(0.1)


def _oh(env: dict[str, str], *argv: str, cwd: Path, extra: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", *argv],
        cwd=cwd,
        env={**env, **(extra or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"oh {' '.join(argv)} failed: {done.stderr}")
    return done.stdout


@contextlib.contextmanager
def _clusters(
    memory_cluster: Any, key_cluster: Any, durable: bool
) -> Iterator[tuple[Schema, Schema]]:
    """A fresh schema on each cluster (started here unless given), set up by the roles SQL."""
    with contextlib.ExitStack() as stack:
        clusters = []
        for given in (memory_cluster, key_cluster):
            if given is None:
                given = PostgresCluster(durable=durable).start()
                stack.callback(given.stop)
                given.execute(roles_bootstrap())
            clusters.append(given)
        memory = stack.enter_context(fresh_schema(clusters[0], "mem"))
        keys = stack.enter_context(fresh_schema(clusters[1], "key"))
        yield memory, keys


def run(
    directory: Path,
    writes: int,
    seed: int | None = None,
    *,
    clients: int = 8,
    races: int = 10,
    memory_cluster: Any = None,
    key_cluster: Any = None,
    durable: bool = False,
) -> dict[str, Any]:
    """Three servers, a purge worker, two clusters; the summary of what they did."""
    seed = seed_of(seed)
    master = MasterKey.generate()
    with _clusters(memory_cluster, key_cluster, durable) as (memory, keys):
        base = {k: v for k, v in os.environ.items() if not k.startswith("OH_")}
        shared = {
            "OH_MEMORY_URL": memory.url(),
            "OH_KNOWLEDGE_URL": memory.url(),
            "OH_KEYS_URL": keys.url(),
            "OH_MASTER_KEY": master.text(),
            "OH_RECALL": "on",
        }
        servers = []
        for n in (1, 2, 3):
            home = directory / f"server-{n}"
            env = {**base, **shared, "OH_KEYS": str(home / "keys"), "OH_DATA": str(home / "data")}
            servers.append(OhServer(home, env))
        purge_home = directory / "purge"
        purge_env = {
            **base,
            "OH_MEMORY_URL": memory.purge_url,
            "OH_KEYS_URL": keys.purge_url,
            "OH_KEYS": str(purge_home / "keys"),
            "OH_DATA": str(purge_home / "data"),
        }
        purge = Process(purge_home, purge_env, ["purge", "--every", "1"])
        try:
            for server in servers:
                server.start()
            purge.start()
            summary = _drive(directory, servers, purge, memory, keys, writes, clients, races)
        finally:
            purge.stop()
            for server in servers:
                server.stop()
        shared_disk = _shared_files(directory, servers)
    ok = (
        summary["lost"] == 0
        and summary["cross_owner_reads"] == 0
        and summary["stale_wrong"] == 0
        and summary["verify_problems"] == 0
        and summary["purged_on_schedule"]
        and summary["forgotten_everywhere"]
        and summary["recalled_through_another_server"]
        and not shared_disk
    )
    return {
        "seed": seed,
        **summary,
        "files_in_two_server_directories": shared_disk,
        "figure": (
            f"{summary['lost']} acknowledged writes lost of {summary['acknowledged']},"
            f" {summary['cross_owner_reads']} cross-owner reads,"
            f" {summary['remember_per_s']:.0f} remember/s over three servers"
            f" ({summary['ratio']:.2f}x raw INSERT)"
        ),
        "ok": ok,
    }


def _shared_files(directory: Path, servers: list[OhServer]) -> list[str]:
    """Relative paths that two servers' directories both hold, but for their logs: none may
    be a database or a key store (each holds its purge status and address, never data)."""
    seen: dict[str, int] = {}
    for server in servers:
        for path in server.directory.rglob("*"):
            if path.is_file() and path.name != "log.txt":
                relative = str(path.relative_to(server.directory))
                seen[relative] = seen.get(relative, 0) + 1
    return sorted(name for name, n in seen.items() if n > 1 and name.endswith((".db", "-wal")))


def _drive(
    directory: Path,
    servers: list[OhServer],
    purge: Process,
    memory: Schema,
    keys: Schema,
    writes: int,
    clients: int,
    races: int,
) -> dict[str, Any]:
    s1, s2, s3 = servers
    ann = _oh(s1.env, "token", "create", "--owner", "ann", cwd=s1.directory).split()[-1]
    bob = _oh(s1.env, "token", "create", "--owner", "bob", cwd=s1.directory).split()[-1]
    owner = {"Authorization": f"Bearer {ann}"}
    other = {"Authorization": f"Bearer {bob}"}
    http = httpx.Client(timeout=60)
    assert http.put(f"{s1.url}/v1/documents/report", headers=owner).status_code in (200, 201)
    assert http.put(f"{s2.url}/v1/documents/theirs", headers=other).status_code in (200, 201)

    def open_notebook(server: OhServer, run: str, headers: dict[str, str]) -> tuple[str, str]:
        document = "report" if headers is owner else "theirs"
        answer = http.post(
            f"{server.url}/v1/documents/{document}/notebooks", headers=headers, json={"run": run}
        ).json()
        return answer["notebook"]["id"], answer["agent_token"]

    notebooks = [open_notebook(servers[i % 3], f"writer-{i}", owner) for i in range(clients)]

    # Agents write through server 1; server 1 is killed mid-write and started again.
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    killed = threading.Event()

    def writer(index: int) -> None:
        notebook_id, token = notebooks[index]
        headers = {"Authorization": f"Bearer {token}"}
        version = 0
        n = 0
        with httpx.Client(headers=headers, timeout=30) as agent:
            while n < writes:
                name = f"note:w{index}-{n}"
                body = {
                    "based_on": version,
                    "request_id": f"w{index}-{n}",
                    "changes": [{"op": "add", "record": {"name": name, "text": f"finding {n}"}}],
                }
                try:
                    answer = agent.post(
                        f"{s1.url}/v1/notebooks/{notebook_id}/tools/remember", json=body
                    ).json()
                except httpx.HTTPError:
                    time.sleep(0.2)  # the server is down: the same request again later
                    continue
                if answer.get("status") == "applied":
                    with lock:
                        acknowledged.append((notebook_id, name))
                    version = answer["version"]
                    n += 1
                elif answer.get("status") == "refused":
                    version = answer["current_version"]  # our own write landed before the kill
                else:
                    time.sleep(0.2)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    while len(acknowledged) < max(1, clients * writes // 3):
        time.sleep(0.01)
    acknowledged_before_kill = len(acknowledged)
    s1.kill()
    killed.set()
    time.sleep(0.5)
    s1.start()
    for thread in threads:
        thread.join()

    # Everything acknowledged is read back through server 2: queried, then read one by one.
    lost = 0
    for notebook_id, token in notebooks:
        headers = {"Authorization": f"Bearer {token}"}
        names = {name for nb, name in acknowledged if nb == notebook_id}
        answer = http.post(
            f"{s2.url}/v1/notebooks/{notebook_id}/tools/query",
            headers=headers,
            json={"question": "changes_since", "since": 0, "limit": 200},
        ).json()
        listed = {row["name"] for row in answer.get("rows", [])}
        for name in names:
            read = http.post(
                f"{s2.url}/v1/notebooks/{notebook_id}/tools/read",
                headers=headers,
                json={"name": name},
            ).json()
            if read.get("name") != name or (len(names) <= 200 and name not in listed):
                lost += 1

    # Recall through server 2 finds a note written through server 1.
    notebook_id, token = notebooks[0]
    headers = {"Authorization": f"Bearer {token}"}
    recalled = False
    deadline = time.monotonic() + 60
    while not recalled and time.monotonic() < deadline:
        answer = http.post(
            f"{s2.url}/v1/notebooks/{notebook_id}/tools/recall",
            headers=headers,
            json={"text": "finding 0", "limit": 3},
        ).json()
        recalled = any(row["name"].startswith("note:w0-") for row in answer.get("rows", []))
        if not recalled:
            time.sleep(0.5)

    # Races: two agents, one notebook, the same version, two servers.
    race_id, race_token = open_notebook(s2, "race", owner)
    race_headers = {"Authorization": f"Bearer {race_token}"}
    stale_wrong = 0
    version = 0
    for n in range(races):
        results: list[dict[str, Any]] = []

        def contender(
            server: OhServer,
            tag: str,
            based_on: int = version,
            n: int = n,
            results: list[dict[str, Any]] = results,
        ) -> None:
            body = {
                "based_on": based_on,
                "request_id": f"race-{n}-{tag}",
                "changes": [{"op": "add", "record": {"name": f"note:r{n}{tag}", "text": "x"}}],
            }
            answer = http.post(
                f"{server.url}/v1/notebooks/{race_id}/tools/remember",
                headers=race_headers,
                json=body,
            ).json()
            with lock:
                results.append(answer)

        pair = [
            threading.Thread(target=contender, args=(s1, "a")),
            threading.Thread(target=contender, args=(s3, "b")),
        ]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()
        applied = [r for r in results if r.get("status") == "applied"]
        refused = [r for r in results if r.get("status") == "refused"]
        if len(applied) != 1 or len(refused) != 1:
            stale_wrong += 1
            continue
        if refused[0]["current_version"] != applied[0]["version"]:
            stale_wrong += 1
        version = applied[0]["version"]

    # Another owner, and agent tokens on another notebook: nothing is answered.
    cross = 0
    theirs_id, theirs_token = open_notebook(s3, "theirs", other)
    for server in servers:
        for method, path in (
            ("GET", f"/v1/notebooks/{notebooks[0][0]}"),
            ("GET", f"/v1/notebooks/{notebooks[0][0]}/records"),
            ("GET", f"/v1/notebooks/{notebooks[0][0]}/records/note:w0-0"),
            ("DELETE", f"/v1/notebooks/{notebooks[1][0]}"),
        ):
            if http.request(method, f"{server.url}{path}", headers=other).status_code < 400:
                cross += 1
        agent = {"Authorization": f"Bearer {theirs_token}"}
        for tool, body in (
            ("read", {"name": "note:w0-0"}),
            ("query", {"question": "changes_since", "since": 0}),
        ):
            url = f"{server.url}/v1/notebooks/{notebooks[0][0]}/tools/{tool}"
            if http.post(url, headers=agent, json=body).status_code < 400:
                cross += 1
    del theirs_id

    # The owner forgets a notebook through server 3; every server answers purged.
    forgotten_id, forgotten_token = notebooks[-1]
    http.delete(f"{s3.url}/v1/notebooks/{forgotten_id}", headers=owner).raise_for_status()
    forgotten_everywhere = _key_gone(keys, forgotten_id) and all(
        http.post(
            f"{server.url}/v1/notebooks/{forgotten_id}/tools/read",
            headers={"Authorization": f"Bearer {forgotten_token}"},
            json={"name": "note:w0-0"},
        ).status_code
        == 410
        for server in servers
    )

    # A notebook opened a day and more ago is purged on the purge worker's schedule.
    purged_on_schedule = _purged_on_schedule(s1, keys, owner, http)

    # Every server's notes verify.
    verified = subprocess.run(
        [sys.executable, "-m", "oh.cli", "verify", "--json"],
        cwd=s3.directory,
        env=s3.env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    verify_problems = 0 if verified.returncode == 0 else max(1, verified.stdout.count("problem"))

    remember_per_s = _throughput(servers, owner, http, clients, writes)
    raw_insert_per_s = _raw_inserts(memory, 3 * clients, writes)
    http.close()
    return {
        "servers": 3,
        "clients_per_server": clients,
        "acknowledged": len(acknowledged),
        "acknowledged_before_kill": acknowledged_before_kill,
        "lost": lost,
        "recalled_through_another_server": recalled,
        "races": races,
        "stale_wrong": stale_wrong,
        "cross_owner_reads": cross,
        "forgotten_everywhere": forgotten_everywhere,
        "purged_on_schedule": purged_on_schedule,
        "verify_problems": verify_problems,
        "verify_output": verified.stdout[-400:] if verified.returncode else "",
        "remember_per_s": remember_per_s,
        "raw_insert_per_s": raw_insert_per_s,
        "ratio": remember_per_s / raw_insert_per_s,
        "purge_worker_alive": purge.process is not None and purge.process.poll() is None,
    }


def _key_gone(keys: Schema, notebook_id: str) -> bool:
    from oh.storage.postgres.keys import PostgresKeyStore

    store = PostgresKeyStore(keys.url(), max_size=1)
    try:
        return store.get(notebook_id) is None
    finally:
        store.close()


def _purged_on_schedule(
    server: OhServer, keys: Schema, owner: dict[str, str], http: httpx.Client
) -> bool:
    """Open a notebook with a clock 25 hours behind (libfaketime), so its forget time has
    passed for everyone else; the purge worker, on the real clock, must purge it."""
    if FAKETIME is None:
        raise RuntimeError("libfaketime is not installed (scripts/test installs it)")
    extra = {
        "LD_PRELOAD": str(FAKETIME),
        "FAKETIME": "-25h",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    opened = _oh(
        server.env,
        "notebook",
        "open",
        "--owner",
        "ann",
        "--document",
        "report",
        "--run",
        "yesterday",
        "--json",
        cwd=server.directory,
        extra=extra,
    )
    notebook_id = json.loads(opened)["notebook"]["id"]
    deadline = time.monotonic() + PURGE_SECONDS
    while time.monotonic() < deadline:
        state = http.get(f"{server.url}/v1/notebooks/{notebook_id}", headers=owner).json()
        if state.get("notebook", state).get("state") == "purged":
            return _key_gone(keys, notebook_id)
        time.sleep(0.5)
    return False


def _throughput(
    servers: list[OhServer], owner: dict[str, str], http: httpx.Client, clients: int, writes: int
) -> float:
    """``clients`` writers per server, each on a notebook of its own, all at once."""
    agents = []
    for s, server in enumerate(servers):
        for c in range(clients):
            answer = http.post(
                f"{server.url}/v1/documents/report/notebooks",
                headers=owner,
                json={"run": f"load-{s}-{c}"},
            ).json()
            agents.append((server, answer["notebook"]["id"], answer["agent_token"]))
    start = threading.Barrier(len(agents) + 1)
    done = [0] * len(agents)

    def load(index: int) -> None:
        server, notebook_id, token = agents[index]
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60) as agent:
            start.wait()
            for n in range(writes):
                body = {
                    "based_on": n,
                    "request_id": f"load-{n}",
                    "changes": [{"op": "add", "record": {"name": f"note:{n}", "text": "load"}}],
                }
                answer = agent.post(
                    f"{server.url}/v1/notebooks/{notebook_id}/tools/remember", json=body
                ).json()
                if answer.get("status") == "applied":
                    done[index] += 1

    seconds = _timed(load, len(agents), start)
    return sum(done) / seconds


def _raw_inserts(memory: Schema, connections: int, rows: int) -> float:
    """The baseline: ``connections`` connections inserting ``rows`` single rows each (a note's
    canonical content, one autocommit transaction per row) into the memory cluster."""
    import psycopg

    from oh.core.records import Record

    content = Record.parse({"name": "note:raw", "text": "load"}).canonical()
    with psycopg.connect(memory.url(), autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE raw_inserts (id BIGSERIAL PRIMARY KEY, notebook_id TEXT NOT NULL,"
            " name TEXT NOT NULL, content TEXT NOT NULL)"
        )
    start = threading.Barrier(connections + 1)

    def insert(worker: int) -> None:
        with psycopg.connect(memory.url(), autocommit=True) as conn:
            start.wait()
            for n in range(rows):
                conn.execute(
                    "INSERT INTO raw_inserts (notebook_id, name, content) VALUES (%s, %s, %s)",
                    (f"nb_{worker}", f"note:{n}", content),
                )

    return connections * rows / _timed(insert, connections, start)


def _timed(work: Any, threads: int, start: threading.Barrier) -> float:
    """Seconds ``threads`` threads running ``work(index)`` take from the moment they all pass
    ``start`` (a barrier for them and this thread) until the last is done."""
    running = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for thread in running:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in running:
        thread.join()
    return time.perf_counter() - began


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--writes", type=int, default=200, help="writes per client")
    parser.add_argument("--clients", type=int, default=8, help="writers per server")
    parser.add_argument("--races", type=int, default=50)
    parser.add_argument("--keep", type=Path, default=None, help="keep the working directory")
    parser.add_argument("--durable", action="store_true", help="clusters with fsync on")
    args = parser.parse_args()
    with scratch("oh-three-servers-", args.keep) as directory:
        summary = run(
            directory,
            args.writes,
            args.seed,
            clients=args.clients,
            races=args.races,
            durable=args.durable,
        )
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
