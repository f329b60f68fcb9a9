"""An OpenAI Agents SDK agent whose working memory is an Oh notebook, reached over MCP.

Run it against your own ``oh serve`` with what ``oh notebook open`` printed
(docs/integrations/openai-agents.md)::

    OH_MCP_URL=http://127.0.0.1:8765/mcp OH_AGENT_TOKEN=oha_... OPENAI_API_KEY=sk-... \\
        .venv/bin/python examples/integrations/agents_sdk_agent.py

``--scripted`` replaces the model with the SDK's ``ScriptedModel`` driven by
``memory_task.next_move``: the same agent, MCP connection and run loop, with no network but
the MCP endpoint and no API key. The test of this integration runs exactly that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

from agents import Agent, Model, RunConfig, Runner
from agents.items import RunItem, ToolCallItem, ToolCallOutputItem
from agents.mcp import MCPServerStreamableHttp
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
from memory_task import (
    INSTRUCTIONS,
    TASK,
    Answer,
    ToolUse,
    Transcript,
    next_move,
    parse_options,
    result_object,
    show,
)
from openai.types.responses import ResponseFunctionToolCall


def scripted_model() -> ScriptedModel:
    """The SDK's scripted model, one step per model call, each step decided by ``next_move``
    from the tool outputs in the input the SDK sends the model."""
    model = ScriptedModel()

    def respond(call: ModelCall) -> ModelStep:
        results = [
            result_object(item["output"])
            for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        move = next_move(results)
        if isinstance(move, Answer):
            return ModelStep(output=[assistant_message(move.text)])
        model.enqueue(ModelStep.respond(respond))
        return ModelStep(
            output=[function_call(move.tool, move.arguments, call_id=f"call-{len(results)}")]
        )

    model.enqueue(ModelStep.respond(respond))
    return model


async def run(mcp_url: str, agent_token: str, model: str | Model | None = None) -> Transcript:
    """Run the task once; ``model`` is a model name, a ``Model`` or the SDK's default."""
    async with MCPServerStreamableHttp(
        {"url": mcp_url, "headers": {"Authorization": f"Bearer {agent_token}"}},
        name="oh",
        cache_tools_list=True,
    ) as oh:
        agent = Agent(name="researcher", instructions=INSTRUCTIONS, mcp_servers=[oh], model=model)
        # A scripted run talks to nothing but the MCP endpoint: no traces are sent anywhere.
        config = RunConfig(tracing_disabled=isinstance(model, ScriptedModel))
        result = await Runner.run(agent, TASK, run_config=config, max_turns=20)
    return Transcript(_tool_uses(result.new_items), str(result.final_output))


def _tool_uses(items: Sequence[RunItem]) -> list[ToolUse]:
    """Each tool call of the run with the output the SDK handed the model, paired by call id.
    MCP tools reach the model as function tools, so their calls are function calls."""
    outputs = {item.call_id: item.output for item in items if isinstance(item, ToolCallOutputItem)}
    calls = [
        item.raw_item
        for item in items
        if isinstance(item, ToolCallItem) and isinstance(item.raw_item, ResponseFunctionToolCall)
    ]
    return [
        ToolUse(call.name, json.loads(call.arguments), result_object(outputs[call.call_id]))
        for call in calls
    ]


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(__doc__.splitlines()[0], argv)
    model = scripted_model() if options.scripted else options.model
    show(asyncio.run(run(options.mcp_url, options.agent_token, model)), as_json=options.json)


if __name__ == "__main__":
    main()
