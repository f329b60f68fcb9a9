"""The host's master keys (docs/keys.md): the key file or ``OH_MASTER_KEY``, the keys a rotation
still accepts, and the knowledge MAC derived from them. A master key never seals content: it
wraps data keys (``oh.keys.cipher``) and authenticates reviewed knowledge (``oh.keys.macs``).
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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from oh.errors import AlreadyExists, IntegrityError, InvalidArgument, NotFound

__all__ = [
    "KEY_FILE",
    "MASTER_KEY_ENV",
    "MASTER_MARKER",
    "NEXT_KEY_FILE",
    "MasterKey",
    "MasterKeys",
    "WrappingKey",
    "load_master_keys",
    "losing_it",
    "read_master_key",
    "write_master_key",
]

MASTER_KEY_ENV = "OH_MASTER_KEY"
KEY_FILE = "master.key"
# The key store's record of the master key its data keys are wrapped by (a shared key store
# refuses a process given another; a rotation moves it).
MASTER_MARKER = "master_key"
NEXT_KEY_FILE = "master.key.next"  # a rotation in progress (``Keyring.rotate``)
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
