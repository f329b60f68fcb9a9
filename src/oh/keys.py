"""Keys (docs/keys.md): what seals notebooks at rest and authenticates reviewed knowledge.

Three kinds of key, each with one job:

* the **master key** of the host: 32 random bytes in a key file (``master.key`` in the keys
  directory, mode 0600) or in ``OH_MASTER_KEY``. It never seals content; it wraps data keys and
  derives the knowledge MAC key. Oh cannot recover anything it protects if it is lost.
* a **data key** per notebook: 32 random bytes made when the notebook is created, kept wrapped
  by the master key in the key store (``oh.storage.key_store``), a file apart from the memory
  database. Every piece of the notebook's content at rest is sealed with it. Forgetting the
  notebook destroys it first: from then on no copy of the content anywhere can be opened.
* the **knowledge MAC key**, derived from the master key: reviewed records and decisions carry
  a MAC under it, so a forgery written straight into the database is refused.

Content is sealed with AES-256-GCM-SIV (RFC 8452) as a deterministic AEAD: one nonce per
notebook, and the associated data binds the notebook, the record's name, version and digest. The
same record version therefore seals to the same text wherever it is kept (its log change and
its current record), which lets the database compare the two without opening either; GCM-SIV
is built for a repeated nonce, which reveals only that two sealed values are the same value
under the same binding, and nothing else.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import hmac
import os
import secrets
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESGCMSIV

from oh.core.seals import vector_model
from oh.errors import AlreadyExists, IntegrityError, InvalidArgument, NotFound, Purged

__all__ = [
    "KEY_FILE",
    "MASTER_KEY_ENV",
    "MASTER_MARKER",
    "SEALED",
    "SEALED_VECTOR",
    "KeyShredding",
    "KeyStore",
    "Keyring",
    "MasterKey",
    "MasterKeys",
    "NotebookCipher",
    "WrappingKey",
    "load_master_keys",
    "losing_it",
    "write_master_key",
]

MASTER_KEY_ENV = "OH_MASTER_KEY"
KEY_FILE = "master.key"
# The key store's record of the master key its data keys are wrapped by (a shared key store
# refuses a process given another; a rotation moves it).
MASTER_MARKER = "master_key"
NEXT_KEY_FILE = "master.key.next"  # a rotation in progress (``Keyring.rotate``)
SEALED = "oh1:"  # how sealed text begins; canonical content always begins with "{"
SEALED_VECTOR = b"ohv1"  # how a sealed recall vector begins (``NotebookCipher.seal_vector``)
_KEY_TEXT = "ohmk1:"  # how a master key's text form begins
_KEY_BYTES = 32
_B64 = base64.b64encode
a2b_base64 = binascii.a2b_base64


@dataclass(frozen=True)
class MasterKey:
    """The host's master key. ``repr`` never shows it."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) != _KEY_BYTES:
            raise InvalidArgument("a master key is 32 bytes")

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(secrets.token_bytes(_KEY_BYTES))

    @classmethod
    def parse(cls, text: str) -> MasterKey:
        """A key from its text form (``ohmk1:`` and 43 base64url characters)."""
        text = text.strip()
        if not text.startswith(_KEY_TEXT):
            raise InvalidArgument(f"a master key's text begins with {_KEY_TEXT}")
        body = text[len(_KEY_TEXT) :]
        try:
            secret = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise InvalidArgument("a master key's text is not base64url") from None
        if len(secret) != _KEY_BYTES or len(body) != 43:
            raise InvalidArgument("a master key is 32 bytes")
        return cls(secret)

    def text(self) -> str:
        return _KEY_TEXT + base64.urlsafe_b64encode(self.secret).decode("ascii").rstrip("=")

    @functools.cached_property
    def id(self) -> str:
        """A name for the key that reveals nothing of it (16 hex digits of a keyed hash)."""
        return hashlib.sha256(b"oh master key id\0" + self.secret).hexdigest()[:16]

    def wrap(self, data_key: bytes, notebook_id: str) -> bytes:
        """``data_key`` sealed for ``notebook_id`` (AES-256-GCM, random nonce first)."""
        nonce = secrets.token_bytes(12)
        return nonce + AESGCM(self.secret).encrypt(nonce, data_key, self._wrap_ad(notebook_id))

    def unwrap(self, wrapped: bytes, notebook_id: str) -> bytes:
        try:
            key = AESGCM(self.secret).decrypt(
                wrapped[:12], wrapped[12:], self._wrap_ad(notebook_id)
            )
        except (InvalidTag, ValueError, TypeError):
            raise IntegrityError(
                f"the data key of notebook {notebook_id} does not open under master key {self.id}"
            ) from None
        if len(key) != _KEY_BYTES:
            raise IntegrityError(f"the data key of notebook {notebook_id} is not 32 bytes")
        return key

    def _wrap_ad(self, notebook_id: str) -> bytes:
        return b"oh data key\0" + self.id.encode() + b"\0" + notebook_id.encode()

    def mac(self, message: bytes) -> bytes:
        """HMAC-SHA256 of ``message`` under the knowledge MAC key this master key derives."""
        return hmac.digest(self._mac_key, message, "sha256")

    @functools.cached_property
    def _mac_key(self) -> bytes:
        return hmac.digest(self.secret, b"oh knowledge mac v1", "sha256")


class WrappingKey(Protocol):
    """What Oh asks of a master key: the interface a key held by a KMS implements. ``MasterKey``
    (a local key file or ``OH_MASTER_KEY``) is the one implementation so far."""

    @property
    def id(self) -> str:
        """A stable name for the key that reveals nothing of it."""

    def wrap(self, data_key: bytes, notebook_id: str) -> bytes:
        """``data_key`` sealed for ``notebook_id``."""

    def unwrap(self, wrapped: bytes, notebook_id: str) -> bytes:
        """The data key ``wrap`` sealed; ``integrity`` if it does not open for the notebook."""

    def mac(self, message: bytes) -> bytes:
        """A MAC of ``message`` under a key derived from this one (reviewed knowledge)."""


@dataclass(frozen=True)
class MasterKeys:
    """The master key in use and any other still accepted (the old one, mid-rotation)."""

    current: WrappingKey
    others: tuple[WrappingKey, ...] = ()

    def by_id(self, key_id: str) -> WrappingKey:
        for key in (self.current, *self.others):
            if key.id == key_id:
                return key
        raise IntegrityError(f"master key {key_id} is not configured (docs/keys.md)")

    def mac(self, purpose: bytes, data: bytes) -> str:
        """The knowledge MAC of ``data`` for ``purpose``, under the current key:
        ``<key id>:<64 hex digits>``."""
        return _mac(self.current, purpose, data)

    def mac_matches(self, purpose: bytes, data: bytes, mac: object) -> bool:
        """Whether ``mac`` is ``data``'s MAC under one of the configured keys."""
        if type(mac) is not str or ":" not in mac:
            return False
        key_id = mac.split(":", 1)[0]
        for key in (self.current, *self.others):
            if key.id == key_id:
                return hmac.compare_digest(_mac(key, purpose, data), mac)
        return False


def _mac(key: WrappingKey, purpose: bytes, data: bytes) -> str:
    tag = key.mac(purpose + b"\0" + data).hex()
    return f"{key.id}:{tag}"


def losing_it(what: str) -> str:
    """The warning every new master key comes with: ``what`` names the key."""
    return (
        f"back up {what} apart from the data directory and its backups. If it is lost, the"
        " notes of open notebooks can never be read again and reviewed knowledge can no longer"
        " be authenticated (docs/keys.md)."
    )


def read_master_key(path: Path) -> MasterKey:
    try:
        text = path.read_text("ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise NotFound(f"cannot read the master key file {path}: {exc}") from None
    return MasterKey.parse(text)


def write_master_key(path: Path, key: MasterKey, *, replace: bool = False) -> None:
    """Write ``key`` to ``path`` (mode 0600) durably; ``already_exists`` unless ``replace``.

    Written to a temporary file, synced and renamed, so a crash leaves the old file or the new
    one, never half of either."""
    exists = AlreadyExists(f"a master key file exists at {path}; Oh never overwrites one")
    if path.exists() and not replace:
        raise exists
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(descriptor, (key.text() + "\n").encode("ascii"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    try:
        if replace:
            os.replace(temporary, path)
        else:
            # A link fails if the name exists, at once: of two processes creating the key at
            # the same moment one wins, and the other is told (never a key overwritten).
            try:
                os.link(temporary, path)
            except FileExistsError:
                raise exists from None
    finally:
        with contextlib.suppress(FileNotFoundError):  # renamed, or linked and left behind
            os.unlink(temporary)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def load_master_keys(keys_dir: Path, environ: Mapping[str, str]) -> MasterKeys | None:
    """The master keys configured: ``OH_MASTER_KEY`` if set, else the key file in ``keys_dir``
    (and the next key of a rotation that did not finish); None when there is neither."""
    text = environ.get(MASTER_KEY_ENV)
    if text:
        return MasterKeys(MasterKey.parse(text))
    current, upcoming = keys_dir / KEY_FILE, keys_dir / NEXT_KEY_FILE
    if not current.exists():
        return None
    key = read_master_key(current)
    if upcoming.exists():
        return MasterKeys(key, (read_master_key(upcoming),))
    return MasterKeys(key)


class KeyStore(Protocol):
    """Where wrapped data keys are kept, apart from the memory data (``oh.storage.key_store``)."""

    def put(self, notebook_id: str, master_id: str, wrapped: bytes) -> None:
        """Keep a notebook's wrapped key durably; ``already_exists`` if it has one."""

    def get(self, notebook_id: str) -> tuple[str, bytes] | None:
        """``(master key id, wrapped key)``, or None when the notebook has no key (any more)."""

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        """Destroy the keys durably, their bytes overwritten; return how many there were."""

    def wrapped(self) -> list[tuple[str, str, bytes]]:
        """Every ``(notebook id, master key id, wrapped key)``."""

    def rewrap(self, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """Replace the wrapped keys of these notebooks in one durable transaction."""

    def marker(self, name: str) -> str | None: ...

    def mark(self, name: str, value: str) -> None: ...

    def claim(self, name: str, value: str) -> str:
        """The marker's value, set to ``value`` first if it has none, atomically."""

    def count(self) -> dict[str, int]:
        """How many data keys each master key (by id) wraps."""

    def close(self) -> None: ...


class KeyShredding(Protocol):
    """The purge worker's credential on the key store: it destroys data keys, and can neither
    read nor create one."""

    def destroy(self, notebook_ids: Iterable[str]) -> int: ...

    def close(self) -> None: ...


class NotebookCipher:
    """Seals and opens one notebook's content with its data key."""

    __slots__ = ("_aead", "_answer", "_nonce", "_note", "_value", "_values", "notebook_id")

    def __init__(
        self,
        notebook_id: str,
        data_key: bytes,
        values: dict[tuple[Any, ...], str] | None = None,
    ) -> None:
        """``values`` is where ``token`` and ``untoken`` remember what they made (the keyring's
        bounded map, shared by its ciphers and emptied whenever a key is destroyed)."""
        self.notebook_id = notebook_id
        self._aead = AESGCMSIV(data_key)
        self._nonce = hashlib.blake2b(notebook_id.encode(), digest_size=12).digest()
        self._note = b"oh note\0" + notebook_id.encode() + b"\0"
        self._answer = b"oh answer\0" + notebook_id.encode() + b"\0"
        self._value = b"oh value\0" + notebook_id.encode() + b"\0"
        self._values: dict[tuple[Any, ...], str] = {} if values is None else values

    def token(self, value: str, column: str, *, keep: bool = True) -> str:
        """``value`` as a column of this notebook keeps it at rest: sealed deterministically
        (AES-GCM-SIV under the data key, one nonce per notebook, bound to ``column``), so equal
        values give equal tokens and the database still finds, joins and compares rows by them,
        while without the key a token tells nothing of the value, and confirms no guess of it.
        Names, kinds, digests, request ids, fingerprints, hashes and answer ids are kept so.

        The token and its value are remembered (``keep``) unless the caller knows it will not
        ask again (a request id, a fingerprint: one per call)."""
        if type(value) is not str:  # a damaged row's value, passed back to find its row
            kind = type(value).__name__
            raise IntegrityError(
                f"notebook {self.notebook_id}: a {column} of the wrong type ({kind})"
            )
        key = (self.notebook_id, column, value)
        values = self._values
        found = values.get(key)
        if found is not None:
            return found
        ad = self._value + column.encode()
        made = SEALED + _B64(self._aead.encrypt(self._nonce, value.encode(), ad)).decode("ascii")
        if keep:
            if len(values) >= _REMEMBERED:
                values.clear()
            values[key] = made
            values[(self.notebook_id, column, made, _OPENED)] = value  # opening it is free
        return made

    def untoken(self, token: object, column: str) -> str:
        """The value ``token`` kept; ``integrity`` when it is not a token of this notebook's
        ``column``."""
        if type(token) is not str:  # a damaged row's value: it does not open
            return self._open(token, b"", f"a {column}")
        key = (self.notebook_id, column, token, _OPENED)
        values = self._values
        found = values.get(key)
        if found is not None:
            return found
        value = self._open(token, self._value + column.encode(), f"a {column}")
        if len(values) >= _REMEMBERED:
            values.clear()
        values[key] = value
        return value

    def _note_ad(self, name: str, version: int, digest: str) -> bytes:
        return self._note + f"{len(name)}:{name}:{version}:{digest}".encode()

    def seal(self, text: str, name: str, version: int, digest: str) -> str:
        """A record version's content sealed, bound to this notebook, its name, version and
        digest."""
        ad = self._note_ad(name, version, digest)
        return SEALED + _B64(self._aead.encrypt(self._nonce, text.encode(), ad)).decode("ascii")

    def open(self, sealed: object, name: str, version: int, digest: str) -> str:
        """The content ``seal`` sealed; ``integrity`` when it is not sealed text that opens
        under this notebook's key for exactly this name, version and digest."""
        # The hot read path: ``_open`` written out, the failure's message built only on failure.
        if type(sealed) is str and sealed.startswith(SEALED):
            ad = self._note + f"{len(name)}:{name}:{version}:{digest}".encode()
            try:
                return self._aead.decrypt(self._nonce, _sealed_bytes(sealed), ad).decode()
            except (InvalidTag, ValueError, binascii.Error):
                pass
        return self._open(sealed, b"", f"record {name!r} at version {version}")

    def seal_field(self, text: str, answer_id: str, column: str) -> str:
        """A kept answer's column sealed, bound to this notebook, the answer and the column."""
        ad = self._answer + f"{len(answer_id)}:{answer_id}:{column}".encode()
        return SEALED + _B64(self._aead.encrypt(self._nonce, text.encode(), ad)).decode("ascii")

    def open_field(self, sealed: object, answer_id: str, column: str) -> str:
        ad = self._answer + f"{len(answer_id)}:{answer_id}:{column}".encode()
        return self._open(sealed, ad, f"answer {answer_id!r} ({column})")

    def seal_vector(self, vector: bytes, model_id: str, digest: str) -> bytes:
        """A recall vector sealed, bound to this notebook, its model and the digest it was
        embedded for: ``SEALED_VECTOR`` and the AES-GCM-SIV ciphertext. Vectors of a note are
        as telling as its words (a word list recovers a text from its hashing embedding), so
        they are kept only sealed, and forgetting the notebook makes them unreadable too."""
        ad = self._vector_ad(model_id, digest)
        return SEALED_VECTOR + self._aead.encrypt(self._nonce, bytes(vector), ad)

    def open_vector(self, sealed: bytes, model_id: str, digest: str) -> bytes:
        """The vector ``seal_vector`` sealed; ``integrity`` when it does not open for exactly
        this notebook, model and digest."""
        if bytes(sealed[:4]) != SEALED_VECTOR:
            raise IntegrityError(f"notebook {self.notebook_id}: a recall vector is not sealed")
        try:
            return self._aead.decrypt(
                self._nonce, bytes(sealed[4:]), self._vector_ad(model_id, digest)
            )
        except (InvalidTag, ValueError):
            raise IntegrityError(
                f"notebook {self.notebook_id}: a recall vector does not open under its key"
            ) from None

    def _vector_ad(self, model_id: str, digest: str) -> bytes:
        model_id = vector_model(model_id)  # a rebuild's staged vector: as the model it becomes
        return (
            b"oh vector\0"
            + self.notebook_id.encode()
            + b"\0"
            + f"{len(model_id)}:{model_id}:{digest}".encode()
        )

    def _open(self, sealed: object, ad: bytes, what: str) -> str:
        if type(sealed) is not str or not sealed.startswith(SEALED):
            raise IntegrityError(f"notebook {self.notebook_id}: {what} is not sealed")
        try:
            return self._aead.decrypt(self._nonce, _sealed_bytes(sealed), ad).decode()
        except (InvalidTag, ValueError, binascii.Error):
            raise IntegrityError(
                f"notebook {self.notebook_id}: {what} does not open under its key"
            ) from None


def _sealed_bytes(sealed: str) -> bytes:
    """The bytes of sealed text, which must be exactly the text ``seal`` writes: strict base64
    (no other character, no missing or extra padding) whose last group has no stray bits. So a
    changed character never reads as the same value: the database keeps one spelling of it."""
    body = a2b_base64(sealed[4:], strict_mode=True)
    size = len(body)
    tail = size % 3
    if len(sealed) != 4 + 4 * ((size + 2) // 3) or (
        tail and _STRAY_BITS[tail] & _B64_VALUES[sealed[-4 + tail]]
    ):
        raise ValueError("sealed text is not in its canonical form")
    return body


# Base64's value of each character, and the bits of the last group's last character that no
# byte uses, by the number of bytes in that group: they must be zero in the one spelling.
_B64_VALUES = {
    c: i
    for i, c in enumerate(string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/")
}
_STRAY_BITS = {1: 0x0F, 2: 0x03}


# Marks the key of an opened value apart from the key of a made token (a plain value may be
# spelled like a token: a request id is any text).
_OPENED = 1


# How many tokens and values a keyring's ciphers remember together (then they start afresh).
_REMEMBERED = 65536


class Keyring:
    """The master keys and the key store: makes, opens, destroys and rewraps data keys.

    Opened data keys are kept in memory (a bounded map) so a read costs no key-store lookup."""

    CACHE = 4096

    def __init__(self, masters: MasterKeys, store: KeyStore) -> None:
        self.masters = masters
        self.store = store
        self._ciphers: dict[str, NotebookCipher] = {}
        # Values the ciphers' ``token`` made and opened, all notebooks together: a read finds a
        # record by its name's token and opens its digest without a cipher call once seen.
        # Emptied whenever a key is destroyed, so no value of a forgotten notebook stays.
        self._values: dict[tuple[Any, ...], str] = {}

    def create(self, notebook_id: str) -> NotebookCipher:
        """A new random data key for ``notebook_id``, kept (wrapped) before this returns."""
        data_key = secrets.token_bytes(_KEY_BYTES)
        current = self.masters.current
        self.store.put(notebook_id, current.id, current.wrap(data_key, notebook_id))
        return self._keep(NotebookCipher(notebook_id, data_key, self._values))

    def cipher(self, notebook_id: str) -> NotebookCipher:
        """The notebook's cipher; ``purged`` when its key was destroyed (it was forgotten)."""
        cipher = self._ciphers.get(notebook_id)
        if cipher is not None:
            return cipher
        found = self.store.get(notebook_id)
        if found is None:
            raise Purged(
                f"notebook {notebook_id} has no data key: it was forgotten, its content can"
                " never be opened again"
            )
        master_id, wrapped = found
        data_key = self.masters.by_id(master_id).unwrap(wrapped, notebook_id)
        return self._keep(NotebookCipher(notebook_id, data_key, self._values))

    def has_key(self, notebook_id: str) -> bool:
        """Whether the key store holds the notebook's key: asked of the store, not of this
        keyring's memory (another server sharing the store may have destroyed it)."""
        return self.store.get(notebook_id) is not None

    def drop(self, notebook_id: str) -> None:
        """Forget the notebook's opened key in memory only: it was forgotten, perhaps through
        another server sharing the key store, and no copy of its key is to stay here."""
        if self._ciphers.pop(notebook_id, None) is not None:
            self._values.clear()

    def _keep(self, cipher: NotebookCipher) -> NotebookCipher:
        if len(self._ciphers) >= self.CACHE:
            self._ciphers.clear()
        self._ciphers[cipher.notebook_id] = cipher
        return cipher

    def destroy(self, notebook_ids: Iterable[str]) -> int:
        """Forget the data keys, in memory and durably in the key store (crypto-shredding)."""
        ids = list(notebook_ids)
        for notebook_id in ids:
            self._ciphers.pop(notebook_id, None)
        self._values.clear()
        return self.store.destroy(ids)

    def rotate(self, new: WrappingKey) -> int:
        """Rewrap every data key under ``new`` in one transaction; return how many. Each key is
        opened first, so a key that does not open stops the rotation before anything changes."""
        rows = []
        for notebook_id, master_id, wrapped in self.store.wrapped():
            data_key = self.masters.by_id(master_id).unwrap(wrapped, notebook_id)
            rows.append((notebook_id, new.id, new.wrap(data_key, notebook_id)))
        self.store.rewrap(rows)
        self.store.mark(MASTER_MARKER, new.id)
        self.masters = MasterKeys(new, (self.masters.current, *self.masters.others))
        return len(rows)

    def close(self) -> None:
        self._ciphers.clear()
        self._values.clear()
        self.store.close()
