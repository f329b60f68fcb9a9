"""A PydanticAI agent whose working memory is an Oh notebook, reached over MCP.

Run it against your own ``oh serve`` with what ``oh notebook open`` printed
(docs/integrations/pydantic-ai.md)::

    OH_MCP_URL=http://127.0.0.1:8765/mcp OH_AGENT_TOKEN=oha_... OPENAI_API_KEY=sk-... \\
        .venv/bin/python examples/integrations/pydantic_ai_agent.py

``--model`` takes any PydanticAI model name (``openai:...``, ``anthropic:...``); the default is
``openai:`` and the OpenAI model ``memory_task.OPENAI_MODEL``. ``--scripted`` replaces the model
with PydanticAI's ``FunctionModel`` driven by ``memory_task.next_move``: the same agent, MCP
toolset and run loop, with no network but the MCP endpoint and no API key. The test of this
integration runs exactly that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memory_task import (
    INSTRUCTIONS,
    OPENAI_MODEL,
    TASK,
    Answer,
    ToolUse,
    Transcript,
    next_move,
    parse_options,
    result_object,
    show,
)
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel


def _scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """One model turn: ``next_move`` over the tool returns PydanticAI put in the history."""
    results = [
        result_object(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    move = next_move(results)
    if isinstance(move, Answer):
        return ModelResponse(parts=[TextPart(move.text)])
    call = ToolCallPart(move.tool, move.arguments, tool_call_id=f"call-{len(results)}")
    return ModelResponse(parts=[call])


def scripted_model() -> FunctionModel:
    """PydanticAI's ``FunctionModel`` playing the scripted agent of ``memory_task``."""
    return FunctionModel(_scripted, model_name="oh-scripted")


async def run(mcp_url: str, agent_token: str, model: Model | str) -> Transcript:
    """Run the task once with ``model`` (a ``Model`` or a PydanticAI model name)."""
    oh = MCPToolset(
        mcp_url,
        id="oh",
        auth=agent_token,
        # Oh answers a failed call with a typed error for the agent to read and act on, not a
        # hint to send the same call again: what PydanticAI calls a failed tool result.
        tool_error_behavior="failed",
        # Oh's server instructions end with the bootstrap, the notebook's current notes. This
        # is your own `oh serve`, so let the model see them.
        include_instructions=True,
    )
    agent = Agent(model, instructions=INSTRUCTIONS, toolsets=[oh])
    async with agent:
        result = await agent.run(TASK)
    return Transcript(_tool_uses(result.all_messages()), str(result.output))


def _tool_uses(messages: Sequence[ModelMessage]) -> list[ToolUse]:
    """Each tool call of the run with the return PydanticAI handed the model, by call id."""
    returns = {
        part.tool_call_id: part.content
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }
    return [
        ToolUse(part.tool_name, part.args_as_dict(), result_object(returns[part.tool_call_id]))
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    ]


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(__doc__.splitlines()[0], argv)
    model = scripted_model() if options.scripted else options.model or f"openai:{OPENAI_MODEL}"
    show(asyncio.run(run(options.mcp_url, options.agent_token, model)), as_json=options.json)


if __name__ == "__main__":
    main()
