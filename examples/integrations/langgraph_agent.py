"""A LangGraph agent whose working memory is an Oh notebook, reached over MCP through
langchain-mcp-adapters.

langchain-mcp-adapters needs mcp<2 and ``oh serve`` needs mcp 2.x, so this runs in a virtual
environment of its own (``scripts/langgraph-venv`` makes ``.venv-langgraph``) and talks to
``oh serve`` over streamable HTTP (docs/integrations/langgraph.md)::

    OH_MCP_URL=http://127.0.0.1:8765/mcp OH_AGENT_TOKEN=oha_... OPENAI_API_KEY=sk-... \\
        .venv-langgraph/bin/python examples/integrations/langgraph_agent.py

A real run uses ``ChatOpenAI`` from ``langchain-openai`` (install it into the same
environment). ``--scripted`` replaces the model with ``ScriptedChatModel``, a LangChain chat
model driven by ``memory_task.next_move``: the same graph, MCP tools and run loop, with no
network but the MCP endpoint and no API key. The test of this integration runs exactly that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
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


class ScriptedChatModel(BaseChatModel):
    """A chat model that plays the scripted agent of ``memory_task``: each turn it reads the
    tool messages in the conversation and answers with the next tool call or the answer."""

    @property
    def _llm_type(self) -> str:
        return "oh-scripted"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        results = [result_object(m.content) for m in messages if isinstance(m, ToolMessage)]
        move = next_move(results)
        if isinstance(move, Answer):
            message = AIMessage(content=move.text)
        else:
            call = {"name": move.tool, "args": move.arguments, "id": f"call-{len(results)}"}
            message = AIMessage(content="", tool_calls=[{**call, "type": "tool_call"}])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        # The script knows its tools already; a real model would be told their schemas here.
        return self


def real_model(name: str | None) -> BaseChatModel:
    try:
        # Only a real run needs it, and it may not be installed.
        from langchain_openai import ChatOpenAI  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise SystemExit(
            "a real model needs langchain-openai: .venv-langgraph/bin/pip install langchain-openai"
        ) from None
    model: BaseChatModel = ChatOpenAI(model=name or OPENAI_MODEL)
    return model


def build_graph(model: BaseChatModel, tools: Sequence[Any]) -> Any:
    """The ReAct loop as a LangGraph graph: the model, then the tools it called, until it
    answers without a tool call."""
    bound = model.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


async def run(mcp_url: str, agent_token: str, model: BaseChatModel) -> Transcript:
    """Run the task once with ``model`` over one MCP session to the notebook."""
    client = MultiServerMCPClient(
        {
            "oh": {
                "transport": "streamable_http",
                "url": mcp_url,
                "headers": {"Authorization": f"Bearer {agent_token}"},
            }
        }
    )
    async with client.session("oh") as session:
        tools = await load_mcp_tools(session)
        graph = build_graph(model, tools)
        state = await graph.ainvoke(
            {"messages": [SystemMessage(INSTRUCTIONS), ("user", TASK)]}, {"recursion_limit": 40}
        )
    messages: list[BaseMessage] = state["messages"]
    return Transcript(_tool_uses(messages), str(messages[-1].content))


def _tool_uses(messages: Sequence[BaseMessage]) -> list[ToolUse]:
    """Each tool call of the run with the tool message LangGraph handed the model, by call id."""
    returns = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
    return [
        ToolUse(call["name"], call["args"], result_object(returns[str(call["id"])]))
        for m in messages
        if isinstance(m, AIMessage)
        for call in m.tool_calls
    ]


def main(argv: Sequence[str] | None = None) -> None:
    options = parse_options(__doc__.splitlines()[0], argv)
    model = ScriptedChatModel() if options.scripted else real_model(options.model)
    show(asyncio.run(run(options.mcp_url, options.agent_token, model)), as_json=options.json)


if __name__ == "__main__":
    main()
