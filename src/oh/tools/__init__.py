"""The agent's tools (docs/tools.md): remember, query, read, explain, recall, and the bootstrap.

Each tool is declared once, in its own module, as an ``oh.tools.spec.Tool``: its typed
arguments and parser, its published schemas, its description, its flags and how it runs.
``TOOLS`` (``oh.tools.registry``) lists them; ``Tools`` (``oh.tools.service``) runs them over
one memory store and one knowledge source. HTTP and MCP only adapt them.
"""

from __future__ import annotations

from oh.tools.bootstrap import BOOTSTRAP_CHARS, BOOTSTRAP_ROWS
from oh.tools.registry import TOOLS, inline_tools, parse_arguments
from oh.tools.service import Tools
from oh.tools.spec import Caller, Example, RecallService, Tool

__all__ = [
    "BOOTSTRAP_CHARS",
    "BOOTSTRAP_ROWS",
    "TOOLS",
    "TOOL_NAMES",
    "Caller",
    "Example",
    "RecallService",
    "Tool",
    "Tools",
    "inline_tools",
    "parse_arguments",
]

# The tools Oh ships, in order (``TOOLS`` is the live list a transport reads).
TOOL_NAMES = tuple(TOOLS)
