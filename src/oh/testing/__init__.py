"""Conformance suites every backend runs, shipped in the package.

A backend's test module subclasses the suites and supplies a few fixtures (how to open a store,
reopen it, open a second connection, and run raw SQL for tamper tests). A backend is done when
it passes the suites unchanged. Needs the ``test`` extra (pytest, hypothesis).
"""
