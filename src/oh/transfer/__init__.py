"""Export and import (docs/cli.md): notebooks or the whole knowledge base as canonical JSON lines.

Written over the storage protocols only, so an export from one backend imports into any other
and gives the same digests: moving from the embedded files to PostgreSQL (or back) is
``oh export`` then ``oh import``. Nothing is recomputed on the way: request ids, authors,
times, hash chains and canonical contents travel exactly as stored.

The format (``format_version`` 1). Every line is one RFC 8785 object and a newline::

    {"format":"oh-export","format_version":1,"type":"header","what":"notebooks"}
    {"type":"notebook","id",...,"version","head_hash",...}     one per notebook, then its log:
    {"type":"entry","version","request_id","fingerprint","author","written_at",
     "prev_hash","hash","changes":[{"op","name","content","digest"}]}
    ...
    {"type":"end","lines":N,"sha256":"<hex of the N lines before this one>"}

A knowledge export (``"what":"knowledge"``) has, per owner, a ``knowledge_base`` line (when the
owner has revisions), then ``revision``, ``reviewed``, ``pack`` and ``proposal`` lines.
``content`` is always the stored canonical JSON text whose sha256 is the ``digest``.

Import reads the file twice: the first pass checks everything (the trailer's line count and
digest, every hash chain, every digest, every canonical form) and writes nothing; only a file
that passes is imported, each notebook and each owner in its own transaction. An id that is
already taken is ``already_exists`` (or skipped with ``skip_existing``).

A **sealed export** (docs/keys.md, Exports) is the same lines sealed under the host's master
key, for an export that is to rest anywhere the data itself may not. Its first line is a plain
RFC 8785 header naming the master key (by id, never the key) and a fresh random 32-byte salt::

    {"chunk_bytes":65536,"cipher":"AES-256-GCM","kdf":"HMAC-SHA256",
     "master_key":"<16 hex digits>","oh_sealed_export":1,"salt":"<base64>"}

then the lines as AES-256-GCM chunks, each ``chunk_bytes`` of plaintext and a 16-byte tag (the
last one shorter, maybe empty), under an export key that the master key derives from the salt
(HMAC-SHA256 under its MAC key, with a label of its own). A chunk's nonce is its index; its
associated data is the header line, the index and whether it is the last, so a chunk changed,
moved, dropped, cut short or taken from another export, and an export cut at a chunk boundary,
all fail to open: ``integrity``, and since the whole export is checked before anything is
written, nothing is imported. Both directions stream one chunk at a time (``sealed_writer``,
``open_export``). Importing opens the lines and then imports them exactly as a plaintext
export's; a store with a keyring seals what it imports under its own data keys.
"""

from __future__ import annotations

from oh.transfer.format import FORMAT, FORMAT_VERSION, Progress
from oh.transfer.reading import ImportReport, check_export, export_contents, import_export
from oh.transfer.sealed import CHUNK_BYTES, SEALED_EXPORT_VERSION, open_export, sealed_writer
from oh.transfer.writing import ExportReport, export_knowledge, export_notebooks

__all__ = [
    "CHUNK_BYTES",
    "FORMAT",
    "FORMAT_VERSION",
    "SEALED_EXPORT_VERSION",
    "ExportReport",
    "ImportReport",
    "Progress",
    "check_export",
    "export_contents",
    "export_knowledge",
    "export_notebooks",
    "import_export",
    "open_export",
    "sealed_writer",
]
