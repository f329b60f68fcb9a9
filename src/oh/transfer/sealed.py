"""Sealed exports (docs/keys.md, Exports): an export's lines as AES-256-GCM chunks under a key
the master key derives from a fresh salt, written and read one chunk at a time
(``oh.transfer``)."""

from __future__ import annotations

import base64
import binascii
import io
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from oh.core.canonical import canonical_bytes, parse_json
from oh.errors import IntegrityError, InvalidArgument
from oh.keys import MasterKeys, WrappingKey

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = [
    "CHUNK_BYTES",
    "SEALED_EXPORT_VERSION",
    "open_export",
    "sealed_under",
    "sealed_writer",
    "sealing",
]


SEALED_EXPORT_VERSION = 1
CHUNK_BYTES = 64 * 1024  # plaintext per chunk: what either direction holds in memory at once
_MIN_CHUNK, _MAX_CHUNK = 64, 1024 * 1024  # what a reader accepts (a header is not a malloc size)
_CIPHER, _KDF = "AES-256-GCM", "HMAC-SHA256"
_TAG = 16
_SALT_BYTES = 32
_SEALED_MARK = b'"oh_sealed_export":'  # how a sealed header is told apart, damaged or not
_HEADER_LIMIT = 4096


def _export_aead(master: WrappingKey, salt: bytes) -> AESGCM:
    """The export key: an HMAC-SHA256 of the salt under the master key's derived MAC key, with
    a purpose label no knowledge MAC has (``WrappingKey.mac``, so a key held elsewhere serves
    too). Fresh for every export (its salt), so chunk indexes can be nonces."""
    return AESGCM(master.mac(b"oh sealed export v1\0" + salt))


def _nonce(index: int) -> bytes:
    return index.to_bytes(12, "big")


def _chunk_ad(header: bytes, index: int, final: bool) -> bytes:
    return header + index.to_bytes(8, "big") + (b"\1" if final else b"\0")


class _Sealing(io.RawIOBase):
    """Writes a sealed export to ``out``: the header at once, then a chunk each time more than
    ``chunk_bytes`` are waiting; the last chunk only on ``finish``, so an export that stops
    before it was finished never opens."""

    def __init__(self, out: IO[bytes], masters: MasterKeys, chunk_bytes: int) -> None:
        super().__init__()
        if not _MIN_CHUNK <= chunk_bytes <= _MAX_CHUNK:
            raise InvalidArgument(f"chunk_bytes must be {_MIN_CHUNK} to {_MAX_CHUNK}")
        master = masters.current
        salt = secrets.token_bytes(_SALT_BYTES)
        header = {
            "oh_sealed_export": SEALED_EXPORT_VERSION,
            "master_key": master.id,
            "salt": base64.b64encode(salt).decode("ascii"),
            "cipher": _CIPHER,
            "kdf": _KDF,
            "chunk_bytes": chunk_bytes,
        }
        self._header = canonical_bytes(header) + b"\n"
        self._aead = _export_aead(master, salt)
        self._out = out
        self._chunk = chunk_bytes
        self._waiting = bytearray()
        self._index = 0
        self._abandoned = False
        out.write(self._header)

    def writable(self) -> bool:
        return True

    def write(self, data: ReadableBuffer) -> int:
        view = memoryview(data)
        if self._abandoned:
            return view.nbytes  # an export that failed: what is left of it is dropped
        self._waiting += view
        while len(self._waiting) > self._chunk:
            self._seal(bytes(self._waiting[: self._chunk]), final=False)
            del self._waiting[: self._chunk]
        return view.nbytes

    def _seal(self, plain: bytes, *, final: bool) -> None:
        ad = _chunk_ad(self._header, self._index, final)
        self._out.write(self._aead.encrypt(_nonce(self._index), plain, ad))
        self._index += 1

    def finish(self) -> None:
        self._seal(bytes(self._waiting), final=True)
        self._waiting.clear()
        self._abandoned = True  # nothing may follow the last chunk
        self._out.flush()

    def abandon(self) -> None:
        self._abandoned = True
        self._waiting.clear()


@contextmanager
def sealed_writer(
    out: IO[bytes], masters: MasterKeys, *, chunk_bytes: int = CHUNK_BYTES
) -> Iterator[BinaryIO]:
    """A stream that writes what it is given to ``out`` as a sealed export under ``masters``'
    current key, a chunk at a time. The last chunk is written when the block ends normally;
    when it raises, the export is left without one, and never imports."""
    sealing = _Sealing(out, masters, chunk_bytes)
    stream = io.BufferedWriter(sealing, buffer_size=chunk_bytes)
    try:
        yield stream
        stream.flush()
        sealing.finish()
    except BaseException:
        sealing.abandon()
        raise
    finally:
        stream.close()  # closes the sealing stream, never ``out``


@contextmanager
def sealing(out: IO[bytes], seal: MasterKeys | None) -> Iterator[IO[bytes]]:
    if seal is None:
        yield out
    else:
        with sealed_writer(out, seal) as stream:
            yield stream


class _Unsealing(io.RawIOBase):
    """Reads a sealed export's lines: one chunk opened at a time, the next one read ahead to
    tell whether this is the last. ``seek`` goes back to the start (and reads forward)."""

    def __init__(
        self, source: BinaryIO, header: bytes, aead: AESGCM, chunk_bytes: int, master_id: str
    ) -> None:
        super().__init__()
        self.master_id = master_id
        self._source = source
        self._header = header
        self._aead = aead
        self._frame = chunk_bytes + _TAG
        self._rewind()

    def _rewind(self) -> None:
        self._source.seek(len(self._header))
        self._index = 0
        self._plain = b""
        self._offset = 0
        self._position = 0
        self._done = False
        self._ahead = self._read_frame()

    def _read_frame(self) -> bytes:
        parts, wanted = [], self._frame
        while wanted:
            part = self._source.read(wanted)
            if not part:
                break
            parts.append(part)
            wanted -= len(part)
        return b"".join(parts)

    def _open_next(self) -> None:
        frame, index = self._ahead, self._index
        if len(frame) == self._frame:
            self._ahead = self._read_frame()
            final = not self._ahead
        else:
            self._ahead, final = b"", True
        if len(frame) < _TAG:
            raise IntegrityError(
                f"the sealed export ends inside chunk {index}: it is truncated (nothing imported)"
            )
        try:
            self._plain = self._aead.decrypt(
                _nonce(index), frame, _chunk_ad(self._header, index, final)
            )
        except InvalidTag:
            raise IntegrityError(
                f"chunk {index} of the sealed export does not open: it was changed, cut short,"
                " reordered or spliced from another export (nothing imported)"
            ) from None
        self._offset = 0
        self._index += 1
        self._done = final

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer).cast("B")
        while self._offset >= len(self._plain):
            if self._done:
                return 0
            self._open_next()
        count = min(view.nbytes, len(self._plain) - self._offset)
        view[:count] = self._plain[self._offset : self._offset + count]
        self._offset += count
        self._position += count
        return count

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._position
        elif whence != io.SEEK_SET:
            raise io.UnsupportedOperation("a sealed export seeks from its start only")
        if offset < self._position:
            self._rewind()
        scratch = bytearray(min(self._frame, max(offset - self._position, 1)))
        while self._position < offset:
            view = memoryview(scratch)[: offset - self._position]
            if not self.readinto(view):
                break
        return self._position


class _Unsealed(io.BufferedReader):
    """The plaintext lines of a sealed export, read a chunk at a time."""

    def __init__(self, raw: _Unsealing) -> None:
        super().__init__(raw, buffer_size=CHUNK_BYTES)
        self.master_id = raw.master_id


def sealed_under(source: BinaryIO) -> str | None:
    return source.master_id if isinstance(source, _Unsealed) else None


def open_export(source: BinaryIO, masters: MasterKeys | None) -> BinaryIO:
    """The export's canonical lines, from a plaintext export (``source`` itself) or a sealed
    one (opened with ``masters``; ``integrity`` when none of them is the key that sealed it,
    naming that key). Only the header is read here; every chunk is checked as it is read."""
    if isinstance(source, _Unsealed):
        return source
    source.seek(0)
    first = source.readline(_HEADER_LIMIT)
    if _SEALED_MARK not in first:
        source.seek(0)
        return source
    header = _sealed_header(first)
    key_id = str(header["master_key"])
    configured = () if masters is None else (masters.current, *masters.others)
    master = next((key for key in configured if key.id == key_id), None)
    if master is None:
        have = (
            "no master key is configured here"
            if not configured
            else "the master key configured here is " + " and ".join(key.id for key in configured)
        )
        raise IntegrityError(
            f"this export is sealed under master key {key_id}, and {have}: it opens only with"
            f" master key {key_id} (docs/keys.md, Exports)"
        )
    salt = base64.b64decode(header["salt"], validate=True)
    aead = _export_aead(master, salt)
    return _Unsealed(_Unsealing(source, first, aead, header["chunk_bytes"], key_id))


def _sealed_header(first: bytes) -> dict[str, Any]:
    """The checked header of a sealed export (its first line, ``first``)."""
    damaged = "the sealed export's header is damaged"
    if not first.endswith(b"\n"):
        raise IntegrityError(f"{damaged} (no end of line)")
    try:
        header = parse_json(first[:-1], "the sealed export's header")
    except InvalidArgument:
        raise IntegrityError(f"{damaged} (not JSON)") from None
    if type(header) is not dict:
        raise IntegrityError(f"{damaged} (not an object)")
    version = header.get("oh_sealed_export")
    if type(version) is int and version != SEALED_EXPORT_VERSION:
        raise InvalidArgument(
            f"sealed export version {version} is not supported here (this Oh reads version"
            f" {SEALED_EXPORT_VERSION})"
        )
    expected = {"oh_sealed_export", "master_key", "salt", "cipher", "kdf", "chunk_bytes"}
    if (
        set(header) != expected
        or version != SEALED_EXPORT_VERSION
        or canonical_bytes(header) != first[:-1]
        or header["cipher"] != _CIPHER
        or header["kdf"] != _KDF
        or type(header["master_key"]) is not str
        or type(header["chunk_bytes"]) is not int
        or not _MIN_CHUNK <= header["chunk_bytes"] <= _MAX_CHUNK
        or type(header["salt"]) is not str
    ):
        raise IntegrityError(f"{damaged} (fields)")
    try:
        salt = base64.b64decode(header["salt"], validate=True)
    except (binascii.Error, ValueError):
        raise IntegrityError(f"{damaged} (salt)") from None
    if len(salt) != _SALT_BYTES:
        raise IntegrityError(f"{damaged} (salt)")
    return header
