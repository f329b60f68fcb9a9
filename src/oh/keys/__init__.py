"""Keys (docs/keys.md): what seals notebooks at rest and authenticates reviewed knowledge.

Three kinds of key, each with one job:

* the **master key** of the host (``oh.keys.master``): 32 random bytes in a key file
  (``master.key`` in the keys directory, mode 0600) or in ``OH_MASTER_KEY``. It never seals
  content; it wraps data keys and derives the knowledge MAC key. Oh cannot recover anything it
  protects if it is lost.
* a **data key** per notebook (``oh.keys.cipher``): 32 random bytes made when the notebook is
  created, kept wrapped by the master key in the key store (``oh.storage.sqlite.keys``), a file
  apart from the memory database. Every piece of the notebook's content at rest is sealed with
  it (``oh.keys.sealing`` seals a store's rows). Forgetting the notebook destroys it first:
  from then on no copy of the content anywhere can be opened.
* the **knowledge MAC key**, derived from the master key: reviewed records and decisions carry
  a MAC under it (``oh.keys.macs``), so a forgery written straight into the database is
  refused.

This package sits below storage: a backend seals and MACs its rows with it, and nothing here
knows a database.
"""

from __future__ import annotations

from oh.keys.cipher import (
    SEALED,
    SEALED_VECTOR,
    Keyring,
    KeyShredding,
    KeyStore,
    NotebookCipher,
)
from oh.keys.master import (
    KEY_FILE,
    MASTER_KEY_ENV,
    MASTER_MARKER,
    NEXT_KEY_FILE,
    MasterKey,
    MasterKeys,
    WrappingKey,
    load_master_keys,
    losing_it,
    read_master_key,
    write_master_key,
)

__all__ = [
    "KEY_FILE",
    "MASTER_KEY_ENV",
    "MASTER_MARKER",
    "NEXT_KEY_FILE",
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
    "read_master_key",
    "write_master_key",
]
