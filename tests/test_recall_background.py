"""Recall never blocks the agent: the deadline on every recall, shadow mode off the request path,
the catch-up loop's logging, and the recall metrics.

Driven through the real cloud adapter (httpx) against a real embeddings endpoint on 127.0.0.1
that can be made slow, down or refusing. No test asserts a duration: "returned before the
endpoint answered" is checked by the endpoint, which has not answered yet.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from oh.config import Locations, RecallConfig
from oh.errors import InvalidArgument
from oh.host import Host, HostSettings
from oh.recall import CatchUpWorker, HashingEmbedder, OpenAIEmbedder, Recall
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.storage.sqlite.vectors import SqliteVectorStore
from oh.testing.lifecycle import FakeClock
from oh.transports.http import create_app

DIMENSIONS = 32
NOTES = {
    "lead:reef-survey": "coral reef recovery survey, methods missing",
    "dataset:tides": "tide gauge records 1990 to 2014",
}


class Endpoint(ThreadingHTTPServer):
    """An OpenAI-compatible embeddings endpoint: ``ok``, ``slow`` (each request waits for
    ``release``, at most 30 s), ``down`` (503) or ``refusing`` (400)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.mode = "ok"
        self.release = threading.Event()
        self.arrived = threading.Semaphore(0)  # one release per request received
        self.lock = threading.Lock()
        self.received = 0
        self.answered = 0
        self.vectors = HashingEmbedder(DIMENSIONS)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def wait_for_request(self) -> None:
        assert self.arrived.acquire(timeout=30), "no request reached the endpoint"


class _Handler(BaseHTTPRequestHandler):
    server: Endpoint

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        server = self.server
        mode = server.mode
        with server.lock:
            server.received += 1
        server.arrived.release()
        if mode == "slow":
            server.release.wait(30)
        if mode == "down":
            self._send(503, {"error": {"message": "overloaded"}})
            return
        if mode == "refusing":
            self._send(400, {"error": {"message": "input too long"}})
            return
        data = [
            {"index": i, "embedding": [float(x) for x in vector]}
            for i, vector in enumerate(server.vectors.embed(texts))
        ]
        self._send(200, {"object": "list", "data": data})
        with server.lock:
            server.answered += 1


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    server = Endpoint()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def stop_sleeping() -> Iterator[threading.Event]:
    """Ends the adapter's backoff sleeps when the test is over."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class Setup:
    """A host over real libSQL files whose recall embeds through ``endpoint``."""

    def __init__(
        self,
        directory: Path,
        endpoint: Endpoint,
        clock: FakeClock,
        sleep: threading.Event,
        *,
        max_retries: int = 0,
        backoff: float = 0.5,
        **settings: Any,
    ) -> None:
        self.memory = SqliteMemoryStore(directory / "memory.db")
        self.knowledge = SqliteKnowledgeStore(directory / "knowledge.db")
        self.registry = SqliteHostRegistry(directory / "knowledge.db")
        self.vectors = SqliteVectorStore(directory / "memory.db")
        self.embedder = OpenAIEmbedder(
            endpoint.url,
            "slow-embed",
            DIMENSIONS,
            timeout=60.0,
            max_retries=max_retries,
            backoff=backoff,
            sleep=sleep.wait,
        )
        self.recall = Recall(self.memory, self.vectors, self.embedder, self.knowledge, clock=clock)
        self.host = Host(
            self.memory,
            self.knowledge,
            self.registry,
            clock=clock,
            settings=HostSettings(**settings),
            recall=self.recall,
        )
        self.host.register_document("ann", "doc")
        notebook, _ = self.host.open_notebook("ann", "doc", "run-1")
        self.notebook_id = notebook.id
        self.token = self.host.agent_token(notebook.id)
        written = self.host.call_tool(
            self.token,
            "remember",
            {
                "based_on": 0,
                "request_id": "r-1",
                "changes": [
                    {"op": "add", "record": {"name": name, "text": text}}
                    for name, text in NOTES.items()
                ],
            },
        )
        assert written["status"] == "applied", written

    def recall_call(self, text: str = "coral reef recovery") -> dict[str, Any]:
        return self.host.call_tool(self.token, "recall", {"text": text})

    def close(self) -> None:
        self.host.stop()
        for store in (self.vectors, self.memory, self.knowledge, self.registry):
            store.close()
        self.embedder.close()


@pytest.fixture
def setups(tmp_path: Path) -> Iterator[list[Setup]]:
    made: list[Setup] = []
    yield made
    for setup in made:
        setup.close()


def _setup(
    setups: list[Setup],
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    sleep: threading.Event,
    **options: Any,
) -> Setup:
    setup = Setup(tmp_path, endpoint, clock, sleep, **options)
    setups.append(setup)
    return setup


# -- the deadline ------------------------------------------------------------------------------


def test_a_recall_answers_at_its_deadline_when_the_endpoint_is_slow(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(
        setups,
        tmp_path,
        endpoint,
        clock,
        stop_sleeping,
        recall_shadow=False,
        recall_deadline=timedelta(seconds=0.5),
    )
    endpoint.mode = "slow"
    answer = setup.recall_call()
    # The endpoint is still sleeping on the query: the call did not wait for it.
    assert endpoint.answered == 0
    assert endpoint.received == 1
    assert answer["error"]["code"] == "storage_unavailable"
    assert "deadline of 0.5 s" in answer["error"]["message"]
    assert answer["error"]["deadline_seconds"] == 0.5
    metrics = setup.host.metrics.render()
    assert 'oh_recall_embedding_failures_total{stage="query",reason="deadline"} 1' in metrics
    assert 'oh_tool_calls_total{tool="recall",outcome="storage_unavailable"} 1' in metrics


def test_a_recall_never_waits_out_the_adapters_retries(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    # Four retries, backing off 5 s, 10 s, 20 s, 20 s: the adapter alone would take a minute.
    setup = _setup(
        setups,
        tmp_path,
        endpoint,
        clock,
        stop_sleeping,
        max_retries=4,
        backoff=5.0,
        recall_shadow=False,
        recall_deadline=timedelta(seconds=0.5),
    )
    endpoint.mode = "down"
    answer = setup.recall_call()
    assert answer["error"]["code"] == "storage_unavailable"
    assert "deadline" in answer["error"]["message"]
    assert endpoint.received == 1  # the adapter is still in its first backoff


def test_once_the_endpoint_answers_again_so_does_recall(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(
        setups,
        tmp_path,
        endpoint,
        clock,
        stop_sleeping,
        recall_shadow=False,
        recall_deadline=timedelta(seconds=0.5),
    )
    setup.recall.catch_up_all()
    endpoint.mode = "slow"
    assert setup.recall_call()["error"]["code"] == "storage_unavailable"
    endpoint.mode = "ok"
    endpoint.release.set()
    answer = setup.recall_call()
    assert answer["shadow"] is False
    assert answer["rows"][0]["name"] == "lead:reef-survey"


def test_the_recall_deadline_must_be_positive(tmp_path: Path, clock: FakeClock) -> None:
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    knowledge = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    registry = SqliteHostRegistry(tmp_path / "knowledge.db")
    vectors = SqliteVectorStore(tmp_path / "memory.db")
    recall = Recall(memory, vectors, HashingEmbedder(DIMENSIONS), knowledge, clock=clock)
    try:
        for seconds in (0, -1):
            with pytest.raises(InvalidArgument, match="deadline"):
                Host(
                    memory,
                    knowledge,
                    registry,
                    clock=clock,
                    settings=HostSettings(recall_deadline=timedelta(seconds=seconds)),
                    recall=recall,
                )
    finally:
        for store in (vectors, memory, knowledge, registry):
            store.close()


def test_the_recall_mode_and_deadline_come_from_options_or_the_environment(
    tmp_path: Path,
) -> None:
    embedded = Locations.resolve(str(tmp_path))
    postgres = Locations.resolve(str(tmp_path), "postgresql://oh@127.0.0.1/oh")
    assert RecallConfig.resolve(embedded, environ={}) == RecallConfig("shadow", None)
    assert RecallConfig.resolve(postgres, environ={}) == RecallConfig("shadow", None)
    environ = {"OH_RECALL": "on", "OH_RECALL_DEADLINE": "0.25"}
    assert RecallConfig.resolve(embedded, environ=environ) == RecallConfig("on", 0.25)
    assert RecallConfig.resolve(embedded, "off", 3.0, environ) == RecallConfig("off", 3.0)
    for bad in ({"OH_RECALL": "sometimes"}, {"OH_RECALL_DEADLINE": "soon"}):
        with pytest.raises(InvalidArgument):
            RecallConfig.resolve(embedded, environ=bad)
    with pytest.raises(InvalidArgument, match="deadline"):
        RecallConfig.resolve(embedded, deadline=0.0, environ={})


# -- shadow mode -------------------------------------------------------------------------------


def test_in_shadow_mode_the_agent_is_answered_before_the_embedder_answers(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    setup.recall.catch_up_all()
    endpoint.mode = "slow"
    answer = setup.recall_call()
    assert answer == {"rows": [], "shadow": True, "pending": 0}
    assert endpoint.answered == 1  # the catch-up's batch; the query is not answered yet
    endpoint.wait_for_request()  # the catch-up's
    endpoint.wait_for_request()  # the measurement, running in the background
    endpoint.release.set()
    assert setup.host.shadow_recall is not None and setup.host.shadow_recall.drain(30)
    metrics = setup.host.metrics.render()
    assert 'oh_events_total{event="recall_shadow"} 1' in metrics
    assert 'oh_events_total{event="recall_shadow_rows"} 1' in metrics


def test_the_shadow_queue_is_bounded_and_what_does_not_fit_is_dropped_and_counted(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(
        setups,
        tmp_path,
        endpoint,
        clock,
        stop_sleeping,
        recall_shadow_queue=1,
        recall_deadline=timedelta(seconds=30),
    )
    endpoint.mode = "slow"
    first = setup.recall_call("reef")
    endpoint.wait_for_request()  # the worker is busy with the first search
    second = setup.recall_call("tides")  # waits in the queue
    third = setup.recall_call("survey")  # does not fit
    for answer in (first, second, third):
        assert answer["rows"] == [] and answer["shadow"] is True
    shadow = setup.host.shadow_recall
    assert shadow is not None and shadow.dropped == 1
    assert 'oh_events_total{event="recall_shadow_dropped"} 1' in setup.host.metrics.render()
    endpoint.release.set()
    assert shadow.drain(30)
    assert shadow.measured == 2
    assert endpoint.received == 2


def test_a_shadow_measurement_that_fails_is_counted_not_shown(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    endpoint.mode = "down"
    assert setup.recall_call() == {"rows": [], "shadow": True, "pending": len(NOTES)}
    shadow = setup.host.shadow_recall
    assert shadow is not None and shadow.drain(30)
    metrics = setup.host.metrics.render()
    assert 'oh_events_total{event="recall_shadow_failed"} 1' in metrics
    assert 'oh_recall_embedding_failures_total{stage="query",reason="unavailable"} 1' in metrics


def test_stopping_the_host_stops_its_recall_threads(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    host = setup.host
    host.start_catch_up(every=0.05)
    setup.recall_call()
    shadow, catch_up = host.shadow_recall, host.recall_catch_up
    assert shadow is not None and catch_up is not None and host.deadline_recall is not None
    assert shadow.drain(30)
    threads = [shadow._thread, catch_up._thread, *host.deadline_recall._threads]
    assert all(thread is not None and thread.is_alive() for thread in threads)
    host.stop()
    for thread in threads:
        assert thread is not None
        thread.join(30)
        assert not thread.is_alive(), thread.name
    # A recall after the stop still answers the agent at once; nothing is measured.
    assert setup.recall_call()["shadow"] is True
    assert shadow.dropped == 1


# -- the catch-up loop -------------------------------------------------------------------------


class Ticks:
    """An injected monotonic clock, in seconds."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "oh.recall" and r.levelno >= logging.WARNING]


def test_a_failing_catch_up_logs_one_line_per_failure_burst(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    ticks = Ticks()
    worker = CatchUpWorker(setup.recall, summary_every=300.0, monotonic=ticks)
    caplog.set_level(logging.DEBUG, logger="oh.recall")
    endpoint.mode = "down"
    for second in range(0, 250, 10):  # 25 failed passes in 4 minutes
        ticks.now = second
        assert worker.run_pass().failure == "unavailable"
    lines = _warnings(caplog)
    assert len(lines) == 1
    assert "recall catch-up failed" in lines[0].getMessage()
    assert "503" in lines[0].getMessage() and "2 pending" in lines[0].getMessage()
    ticks.now = 310.0  # five minutes into the burst: one summary
    worker.run_pass()
    ticks.now = 320.0
    worker.run_pass()
    lines = _warnings(caplog)
    assert len(lines) == 2 and "still failing after 26 passes" in lines[1].getMessage()
    endpoint.mode = "ok"
    ticks.now = 330.0
    assert worker.run_pass().failure is None
    worker.run_pass()
    lines = _warnings(caplog)
    assert len(lines) == 3
    assert "recovered after 27 failed passes in 330 s" in lines[2].getMessage()
    shown = [r for r in caplog.records if r.name == "oh.recall"]
    assert [r.exc_info for r in shown if r.exc_info] == []
    assert not worker.failing


def test_a_notebook_whose_texts_are_refused_is_logged_once_not_every_pass(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
    caplog: pytest.LogCaptureFixture,
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    worker = CatchUpWorker(setup.recall, monotonic=Ticks())
    endpoint.mode = "refusing"
    for _ in range(5):
        assert worker.run_pass().refused == 1
    lines = [r for r in _warnings(caplog) if setup.notebook_id in r.getMessage()]
    assert len(lines) == 1 and "input too long" in lines[0].getMessage()
    endpoint.mode = "ok"
    assert worker.run_pass().refused == 0
    lines = [r for r in _warnings(caplog) if setup.notebook_id in r.getMessage()]
    assert len(lines) == 2 and "works again" in lines[1].getMessage()


# -- metrics -----------------------------------------------------------------------------------


def test_metrics_show_pending_embeddings_and_embedding_failures(
    tmp_path: Path,
    endpoint: Endpoint,
    clock: FakeClock,
    stop_sleeping: threading.Event,
    setups: list[Setup],
) -> None:
    setup = _setup(setups, tmp_path, endpoint, clock, stop_sleeping)
    worker = setup.host.recall_catch_up
    assert worker is not None
    endpoint.mode = "down"
    worker.run_pass()
    worker.run_pass()
    with TestClient(create_app(setup.host)) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert "# TYPE oh_recall_pending_embeddings gauge" in text
    assert f"\noh_recall_pending_embeddings {len(NOTES)}\n" in text
    assert "# TYPE oh_recall_embedding_failures_total counter" in text
    assert 'oh_recall_embedding_failures_total{stage="catch_up",reason="unavailable"} 2' in text
    endpoint.mode = "ok"
    worker.run_pass()
    text = setup.host.metrics.render()
    assert "\noh_recall_pending_embeddings 0\n" in text
    assert 'oh_recall_embedding_failures_total{stage="catch_up",reason="unavailable"} 2' in text


def test_a_host_without_recall_shows_no_recall_metrics(tmp_path: Path, clock: FakeClock) -> None:
    memory = SqliteMemoryStore(tmp_path / "memory.db")
    knowledge = SqliteKnowledgeStore(tmp_path / "knowledge.db")
    registry = SqliteHostRegistry(tmp_path / "knowledge.db")
    try:
        host = Host(memory, knowledge, registry, clock=clock)
        assert "oh_recall_" not in host.metrics.render()
        host.stop()
    finally:
        for store in (memory, knowledge, registry):
            store.close()
