"""Oh's pure core: records, canonical JSON, digests and write semantics.

Standard library (and the ``rfc8785`` serializer) only; no I/O. Everything above builds on it.
"""
