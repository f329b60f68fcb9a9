"""The tools, each declared once in its own module, listed in the order agents see them.

Everything that offers or describes a tool reads ``TOOLS``: ``Tools.run`` dispatches through it,
HTTP routes it, MCP lists it, the OpenAPI document and ``oh schemas`` publish it, the host counts
it; tests hold docs/tools.md and ``oh.client`` to it. Adding a tool is one module with its
``Tool`` and one line here (CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import Any

from oh.errors import InvalidArgument
from oh.tools import explain, query, read, recall, remember
from oh.tools.spec import Tool

__all__ = ["TOOLS", "inline_tools", "parse_arguments"]

TOOLS: dict[str, Tool[Any]] = {
    tool.name: tool for tool in (remember.TOOL, query.TOOL, read.TOOL, explain.TOOL, recall.TOOL)
}


def inline_tools() -> frozenset[str]:
    """The tools that read briefly (``Tool.inline``), which a transport over an embedded
    database may run on its event loop."""
    return frozenset(name for name, tool in TOOLS.items() if tool.inline)


def parse_arguments(tool: str, arguments: Any) -> Any:
    """The typed arguments of one call of ``tool``, or ``invalid_argument`` (``too_many_changes``,
    ``unknown_question``) saying what is wrong. ``arguments`` is what the agent sent: parsed
    JSON from a transport, or values a library caller built, read by the same number rule
    (``5.0`` is 5; JSON Schema's "integer" is a number whose value is an integer)."""
    try:
        return TOOLS[tool].parse(arguments)
    except RecursionError:
        raise InvalidArgument(f"{tool}: arguments nested too deep") from None
