"""Data keys (docs/keys.md): one per notebook, wrapped by the master key in a key store kept
apart from the memory data, and the cipher that seals and opens a notebook's content with it.

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
import hashlib
import secrets
import string
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

from oh.core.seals import vector_model
from oh.errors import IntegrityError, Purged
from oh.keys.master import MASTER_MARKER, MasterKeys, WrappingKey

__all__ = [
    "SEALED",
    "SEALED_VECTOR",
    "KeyShredding",
    "KeyStore",
    "Keyring",
    "NotebookCipher",
]

SEALED = "oh1:"  # how sealed text begins; canonical content always begins with "{"
SEALED_VECTOR = b"ohv1"  # how a sealed recall vector begins (``NotebookCipher.seal_vector``)
_KEY_BYTES = 32  # a data key
_B64 = base64.b64encode
a2b_base64 = binascii.a2b_base64


class KeyStore(Protocol):
    """Where wrapped data keys are kept, apart from the memory data (``oh.storage.sqlite.keys``)."""

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
