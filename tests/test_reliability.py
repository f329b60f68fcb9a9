"""Reliability and security proof, small: each suite of stress/ at a size CI can afford (a few
seconds each). The full runs and their published figures are in docs/reliability.md
(``make stress``).

Tests marked ``xfail(strict=True)`` pin bugs found by these suites and not fixed yet; each
says what is wrong. When the bug is fixed the test passes, strict xfail turns that into a
failure, and the marker comes off.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from oh.core.changes import parse_changes
from oh.errors import StorageUnavailable
from oh.testing.lifecycle import FakeClock
from oh.testing.memory_store import T0, open_notebook
from oh.testing.postgres_cluster import shared_cluster
from oh.verify import verify_notebook, verify_store

STRESS = Path(__file__).resolve().parents[1] / "stress"


def stress(name: str) -> ModuleType:
    """A script of stress/ as a module (its directory is where its own imports live)."""
    if str(STRESS) not in sys.path:
        sys.path.insert(0, str(STRESS))
    return importlib.import_module(name)


harness = stress("harness")
Target = harness.Target


@pytest.fixture
def libsql(tmp_path: Path) -> Any:
    return Target.libsql(tmp_path)


@pytest.fixture
def postgres() -> Iterator[Any]:
    with harness.postgres_target(shared_cluster()) as target:
        yield target


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with harness.Server(tmp_path_factory.mktemp("reliability") / "data", recall="shadow") as up:
        yield up


def _add(name: str, text: str = "x") -> Any:
    return parse_changes([{"op": "add", "record": {"name": name, "text": text}}])


# -- 1. crash safety ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_every_acknowledged_write_survives_a_sigkill_and_none_lands_half(
    backend: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(backend)
    summary = stress("crash_safety").run(target, 6 if backend == "libsql" else 3, seed=1)
    assert summary["failures"] == []
    assert summary["passed"] == summary["runs"]
    assert summary["acknowledged_calls"] > 0


def test_acknowledged_writes_of_concurrent_writers_survive_a_sigkill(libsql: Any) -> None:
    """Four writer threads on four notebooks through one store share flushes (group commit);
    killed at random moments, every acknowledged call of each is durable, none lands half."""
    summary = stress("crash_safety").run(libsql, 4, seed=2, writers=4)
    assert summary["failures"] == []
    assert summary["passed"] == summary["runs"]
    assert summary["acknowledged_calls"] > 0


def test_the_crash_checker_notices_a_lost_acknowledgement(libsql: Any) -> None:
    crash = stress("crash_safety")
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )
    store.close()
    logged = [["add", "note:b", "0" * 64]]
    messages = [
        {"ready": 0},
        {"intent": "b", "based_on": 0, "changes": [], "logged": logged},
        {"ack": "b", "result": {"status": "applied", "version": 1, "written": []}},
    ]
    failures, _ = crash.check_run(libsql, notebook_id, messages)
    assert any("acknowledged b is missing" in failure for failure in failures)
    assert any("nobody asked for" in failure for failure in failures)


# -- 2. concurrency -------------------------------------------------------------------------------


def test_three_servers_that_share_nothing_on_disk_behave_as_one(tmp_path: Path) -> None:
    """stress/three_servers.py, small: three oh serve processes, their own directories, one
    memory cluster, a key cluster of its own, a purge worker apart; one server killed mid-write."""
    summary = stress("three_servers").run(
        tmp_path, 12, seed=1, clients=4, races=5, memory_cluster=shared_cluster()
    )
    assert summary["acknowledged"] == 4 * 12 and summary["lost"] == 0, summary
    assert 0 < summary["acknowledged_before_kill"] < summary["acknowledged"]
    assert summary["stale_wrong"] == 0 and summary["cross_owner_reads"] == 0, summary
    assert summary["recalled_through_another_server"], summary
    assert summary["forgotten_everywhere"] and summary["purged_on_schedule"], summary
    assert summary["verify_problems"] == 0, summary["verify_output"]
    assert summary["files_in_two_server_directories"] == []
    assert summary["purge_worker_alive"] and summary["remember_per_s"] > 0
    assert summary["ok"]


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_contested_writers_lose_no_update_and_every_refusal_is_current(
    backend: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(backend)
    writes = 800 if backend == "libsql" else 300
    summary = stress("contested_writes").run(target, writes, seed=1, writers=8, notebooks=2)
    assert summary["writes"] == writes
    assert summary["examples"] == {}
    assert summary["crashed_writers"] == []
    assert summary["ok"], summary
    assert summary["applied"] > 0


def test_the_history_checker_notices_lost_updates_and_stale_refusals(libsql: Any) -> None:
    contested = stress("contested_writes")
    store = libsql.open()
    notebook_id = open_notebook(store)
    real = store.remember(
        notebook_id,
        based_on=0,
        request_id="r1",
        changes=parse_changes(
            [
                {"op": "add", "record": {"name": "note:r1", "text": "note:r1"}},
                {"op": "add", "record": {"name": contested.HOT, "text": "hot"}},
            ]
        ),
        author="x",
        now=T0,
    )
    store.close()
    history = [
        {"nb": notebook_id, "rid": "r1", "hot": "hot", "t0": 1, "t1": 2, "based_on": 0}
        | {"result": real.to_json()},
        # A second write told it was applied at version 1 too: a lost update.
        {"nb": notebook_id, "rid": "r2", "hot": None, "t0": 3, "t1": 4, "based_on": 0}
        | {"result": {"status": "applied", "version": 1, "written": []}},
        # A refusal that reported the version the call was based on.
        {"nb": notebook_id, "rid": "r3", "hot": None, "t0": 5, "t1": 6, "based_on": 1}
        | {"result": {"status": "refused", "reason": "stale", "current_version": 1}},
    ]
    violations = contested.check(libsql, [notebook_id], history)
    assert violations["duplicate_versions"]
    assert violations["lost_updates"]
    assert violations["bad_refusals"]


# -- 3. retries -----------------------------------------------------------------------------------


def test_identical_retries_return_the_original_and_other_payloads_are_reused(
    libsql: Any,
) -> None:
    summary = stress("retries").in_process(libsql, 1500, seed=1)
    assert summary["failures"] == []
    assert summary["identical_original"] == summary["identical"] > 0
    assert summary["reused_refused"] == summary["reused"] > 0
    assert summary["extra_log_entries"] == 0
    assert summary["ok"]


def test_retries_across_a_killed_server_return_the_original_bytes(tmp_path: Path) -> None:
    summary = stress("retries").over_http(tmp_path, kills=1, seed=1, agents=2)
    assert summary["failures"] == []
    assert summary["byte_identical"] == summary["requests"] > 0
    assert summary["reused_refused"] == summary["requests"]
    assert summary["extra_log_entries"] == 0
    assert summary["ok"]


# -- 4. atomicity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_a_batch_with_one_invalid_change_never_applies_partially(
    backend: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(backend)
    summary = stress("atomicity").run(target, 300 if backend == "libsql" else 100, seed=1)
    assert summary["examples"] == []
    assert summary["partial_applies"] == 0
    assert "database fails mid-transaction" in summary["by_kind"]
    assert summary["ok"]


# 5. purge races: tests/test_stress_smoke.py runs stress/purge_race.py small.

# -- 6. authorization -----------------------------------------------------------------------------


def test_no_wrong_credential_reaches_another_owners_notebook(server: Any) -> None:
    summary = stress("authz_matrix").run_on(server, seed=1)
    assert summary["crossed"] == []
    assert summary["cross_owner_access"] == 0
    assert not summary["state_changed"]
    assert summary["right_credential_reads"]
    assert summary["improper"] == []  # every refusal unauthenticated, forbidden or not_found


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_the_purge_credential_can_only_purge(backend: str, request: pytest.FixtureRequest) -> None:
    target = request.getfixturevalue(backend)
    summary = stress("authz_matrix").purge_matrix(target)
    assert summary["got_through"] == []
    assert summary["attempts"] > 30
    assert summary["legitimate_purge"]
    assert summary["ok"]


def test_a_non_ascii_agent_token_is_unauthenticated(server: Any) -> None:
    import httpx

    owner = server.owner_token("ascii-check")
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {owner}"})
    http.put("/v1/documents/ascii-doc")
    opened = http.post("/v1/documents/ascii-doc/notebooks", json={"run": "r"}).json()
    token = opened["agent_token"][:-1] + "\u00e9"
    answer = httpx.post(
        f"{server.url}/v1/notebooks/{opened['notebook']['id']}/tools/query",
        json={"question": "current_notes"},
        headers={"Authorization": f"Bearer {token}".encode("latin-1")},
    )
    assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthenticated")


# -- 7. malformed input ---------------------------------------------------------------------------


def test_malformed_input_never_gets_a_500_and_every_rejection_is_typed(
    server: Any, tmp_path: Path
) -> None:
    summary = stress("malformed_input").run(tmp_path, 150, seed=1, server=server)
    assert summary["tool_calls_in_process"]["problems"] == []
    assert summary["server_errors"] == 0
    assert summary["untyped_rejections"] == 0
    assert summary["caught_by_the_catch_all"] == 0
    assert summary["server_alive_after"]
    limits = summary["size_limit"]
    assert limits["refused_before_read"] == limits["checked"], limits["by_route"]


def test_the_same_bytes_mean_the_same_over_http_mcp_and_the_library(
    server: Any, tmp_path: Path
) -> None:
    """stress/parity.py, small: generated tool calls, spelled and spoiled, on three transports."""
    summary = stress("parity").run(tmp_path, 150, seed=1, server=server)
    assert summary["examples"] == []
    assert summary["mismatches"] == summary["server_errors"] == 0
    assert summary["answers"].get("applied", 0) > 0 and summary["answers"]["invalid_argument"] > 0


def test_schemathesis_with_every_check_finds_nothing_positive_or_negative_owner_or_agent(
    tmp_path: Path,
) -> None:
    """The published schemas are the enforced schemas (stress/published_schemas.py, small)."""
    summary = stress("published_schemas").run(tmp_path, 4, seed=1, phases="coverage,fuzzing")
    assert summary["failures"] == []
    assert all(summary["cases"].values()), summary["cases"]
    assert summary["caught_by_the_catch_all"] == 0
    assert summary["server_alive_after"]


@pytest.mark.parametrize("chunked", [False, True])
def test_an_mcp_body_over_the_limit_is_refused_before_it_is_read(
    server: Any, chunked: bool
) -> None:
    malformed = stress("malformed_input")
    world = malformed.setup(server)
    refused, status = malformed.refused_before_read(
        server.port, "/mcp", world["agent"], chunked=chunked
    )
    assert refused, status


# -- 8. tokens ------------------------------------------------------------------------------------


def test_forged_altered_expired_and_foreign_tokens_are_never_accepted(tmp_path: Path) -> None:
    summary = stress("tokens").run(tmp_path, 1500, seed=1)
    assert summary["accepted"] == 0, summary["accepted_examples"]
    assert summary["accepted_examples"] == []
    assert summary["refused_with_another_code"] == 0
    assert summary["mishandled"] == []


def test_a_token_has_exactly_one_spelling(tmp_path: Path) -> None:
    tokens = stress("tokens")
    summary = tokens.run(tmp_path, 600, seed=2)
    accepted, tried = map(int, summary["same_bytes_other_spelling_accepted"].split("/"))
    assert tried > 0
    assert accepted == 0


# -- 9. tamper evidence ---------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_verify_notices_every_alteration_and_read_never_serves_damage(
    backend: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(backend)
    summary = stress("tamper").run(target, 250 if backend == "libsql" else 50, seed=3)
    assert summary["crash_examples"] == []
    assert summary["missed_examples"] == []
    assert summary["verify_missed"] == summary["verify_crashed"] == 0
    # Reads happened and reached the check: genuine content served, damage refused, and no
    # read answered with a code the alteration cannot explain (``expired``, say).
    assert summary["unexpected_read_examples"] == []
    assert summary["read_answered_unexpectedly"] == 0
    assert summary["reads"] > 0
    assert summary["read_served_genuine"] > 0
    assert summary["read_served_damaged"] == 0
    assert summary["read_refused_integrity"] > 0
    assert summary["ok"], summary["figure"]


def test_the_tamper_suite_fails_when_its_reads_never_reach_the_integrity_check(
    libsql: Any,
) -> None:
    """Reads on a clock where every notebook has expired check nothing: the run must fail,
    never report ``read served damage: 0`` as a pass."""
    expired = FakeClock(T0 + timedelta(hours=25))
    # Record alterations only: a notebook row's state edited behind Oh may itself explain a
    # refusal, and this run is about reads that explain nothing.
    summary = stress("tamper").run(libsql, 20, seed=3, notebooks=1, derived=0, clock=expired)
    assert summary["reads"] > 0
    assert summary["read_answered_unexpectedly"] == summary["reads"]
    assert summary["read_served_genuine"] == 0
    assert any(example.endswith(": expired") for example in summary["unexpected_read_examples"])
    assert not summary["ok"]


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_verify_notices_every_alteration_of_a_derived_copy(
    backend: str, request: pytest.FixtureRequest
) -> None:
    # Kept answers and notebook metadata on both backends; recall vectors where they live.
    tamper = stress("tamper")
    target = request.getfixturevalue(backend)
    trials = 60 if backend == "libsql" else 30
    summary = tamper.run(target, trials, seed=4, notebooks=2, derived=1.0)
    assert summary["crash_examples"] == []
    assert summary["missed_examples"] == []
    assert summary["verify_missed"] == summary["verify_crashed"] == 0
    assert summary["read_served_damaged"] == 0
    kinds = {kind.split()[0].split(".")[0] for kind in summary["by_kind"]}
    assert kinds == {"answers", "notebooks"} | ({"note_vectors"} if backend == "libsql" else set())
    assert len(summary["by_kind"]) >= (15 if backend == "libsql" else 11)
    assert summary["alterations"] > 0


def test_verify_reports_a_change_without_content_instead_of_crashing(libsql: Any) -> None:
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )
    libsql.execute("UPDATE log SET content = NULL WHERE notebook_id = ?", (notebook_id,))
    try:
        assert not verify_notebook(store, notebook_id).ok
    finally:
        store.close()


def test_verify_reports_a_value_of_the_wrong_type_instead_of_crashing(libsql: Any) -> None:
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )
    libsql.execute(
        "UPDATE log SET author = CAST(author AS BLOB) WHERE notebook_id = ?", (notebook_id,)
    )
    try:
        assert not verify_notebook(store, notebook_id).ok
    finally:
        store.close()


@pytest.mark.parametrize("table", ["records", "log"])
def test_verify_reports_a_name_of_the_wrong_type_instead_of_crashing(
    libsql: Any, table: str
) -> None:
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )
    libsql.execute(
        f"UPDATE {table} SET name = CAST(name AS BLOB) WHERE notebook_id = ?", (notebook_id,)
    )
    try:
        assert not verify_notebook(store, notebook_id).ok
    finally:
        store.close()


def test_verify_accepts_a_forgotten_notebook(libsql: Any) -> None:
    """Found by the I/O fault suite (fixed in 305e886): a tombstone is not a truncated log."""
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )
    store.forget(notebook_id, T0)
    try:
        report = verify_store(store)
        assert report.ok, json.dumps(report.to_json())
    finally:
        store.close()


# -- 10. forgetting -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["libsql", "postgres"])
def test_forgotten_and_purged_text_leaves_every_file(
    backend: str, request: pytest.FixtureRequest
) -> None:
    target = request.getfixturevalue(backend)
    summary = stress("forgetting").run(target, 6, seed=1, analyze=False)
    assert summary["markers_not_seen_before_forgetting"] == 0
    assert summary["kept_markers_missing"] == 0
    assert summary["figure"] == "bytes found: 0", summary["examples"]


def test_forgotten_text_leaves_no_copy_behind_in_rebuilt_pages(libsql: Any) -> None:
    summary = stress("forgetting").run(libsql, 4, seed=11)  # seed 11 moves cells early
    assert summary["times_a_forgotten_marker_was_found_after_compaction"] == 0
    assert summary["figure"] == "bytes found: 0", summary["examples"]


def test_forgotten_text_is_not_kept_in_postgres_statistics(postgres: Any) -> None:
    summary = stress("forgetting").run(postgres, 4, seed=1, analyze=True)
    assert summary["figure"] == "bytes found: 0", summary["examples"]


# -- 11. I/O faults -------------------------------------------------------------------------------


def test_full_read_only_and_locked_databases_answer_storage_unavailable_and_recover(
    tmp_path: Path,
) -> None:
    summary = stress("io_faults").run(tmp_path, 4, seed=1)
    assert summary["other_answers"] == []
    assert summary["answered_storage_unavailable"] == summary["faults"]
    assert summary["corrupted"] == 0
    assert summary["lost_acknowledged_writes"] == 0
    assert summary["recovered"] == summary["faults"]


def test_a_forget_whose_compaction_fails_still_answers_forgotten(libsql: Any) -> None:
    store = libsql.open()
    notebook_id = open_notebook(store)
    store.remember(
        notebook_id, based_on=0, request_id="a", changes=_add("note:a"), author="x", now=T0
    )

    def full_disk() -> bool:
        raise StorageUnavailable("storage unavailable: database or disk is full")

    store.compact = full_disk  # type: ignore[method-assign]
    try:
        store.forget(notebook_id, T0)
        assert store.notebook(notebook_id).state == "purged"
    finally:
        store.close()


def test_a_file_size_limit_answers_storage_unavailable_and_recovers(tmp_path: Path) -> None:
    """The disk-full fallback without root: RLIMIT_FSIZE in a child process."""
    import subprocess

    done = subprocess.run(
        harness.script_command("io_faults.py", "--disk-full-rlimit", str(tmp_path), "3", "1"),
        capture_output=True,
        text=True,
        check=True,
    )
    cycles = json.loads(done.stdout)
    assert [set(c["answers"]) for c in cycles] == [{"storage_unavailable"}] * 3
    assert all(c["recovered"] and c["sound"] and c["lost"] == 0 for c in cycles)
