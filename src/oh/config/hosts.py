"""The reference host over a configuration's stores, and its recall service (``oh.config``)."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from oh.config.locations import Locations
from oh.config.stores import (
    open_host_registry,
    open_knowledge_store,
    open_memory_store,
    open_vector_store,
)
from oh.core.clock import Clock, system_clock
from oh.errors import InvalidArgument
from oh.host import Host, HostSettings

__all__ = [
    "RECALL_MODES",
    "RecallConfig",
    "close_host",
    "close_recall",
    "open_agent_host",
    "open_host",
    "open_recall",
]


def open_recall(
    locations: Locations, embedder: str | None = None, *, clock: Clock = system_clock
) -> Any:
    """The recall service over the memory database (``OH_EMBEDDER`` picks the embedder:
    ``hashing`` by default, ``local``, ``openai``). ``clock`` must be the host's: recall
    answers only for notebooks that are open by it. ``close_recall`` closes it."""
    from oh.recall import Recall, embedder_from_env

    memory = open_memory_store(locations)
    try:
        vectors = open_vector_store(locations)
        try:
            return Recall(
                memory,
                # Recall reads the notes to embed through the memory store's keyring (it owns it).
                vectors,
                embedder_from_env(kind=embedder),
                open_knowledge_store(locations),
                clock=clock,
            )
        except BaseException:
            vectors.close()
            raise
    except BaseException:
        memory.close()
        raise


def close_recall(recall: Any) -> None:
    """Close what ``open_recall`` opened: its stores and the embedder's connections."""
    for part in (recall.memory, recall.vectors, recall.knowledge, recall.embedder):
        close = getattr(part, "close", None)
        if close is not None:
            close()


RECALL_MODES = ("off", "shadow", "on")


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """How a serving host offers ``recall``, the same for ``oh serve`` and ``oh mcp``.

    ``mode``: ``--recall`` or ``OH_RECALL`` — ``shadow`` (computed and measured, the agent gets
    no rows; the default on both backends), ``on``, or ``off`` (no recall tool).
    ``deadline``: seconds one recall may take, ``--recall-deadline`` or ``OH_RECALL_DEADLINE``
    (None: the host default).
    """

    mode: str
    deadline: float | None = None

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def shadow(self) -> bool:
        return self.mode != "on"

    @classmethod
    def resolve(
        cls,
        locations: Locations,
        mode: str | None = None,
        deadline: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> RecallConfig:
        """Explicit values win over the environment, which wins over the defaults."""
        env = os.environ if environ is None else environ
        chosen = mode or env.get("OH_RECALL") or "shadow"
        if chosen not in RECALL_MODES:
            raise InvalidArgument(
                f"recall must be one of {', '.join(RECALL_MODES)}, not {chosen!r}"
            )
        seconds: float | None = deadline
        raw = env.get("OH_RECALL_DEADLINE")
        if seconds is None and raw:
            try:
                seconds = float(raw)
            except ValueError:
                raise InvalidArgument(f"OH_RECALL_DEADLINE must be seconds, not {raw!r}") from None
        if seconds is not None and not 0 < seconds < math.inf:
            raise InvalidArgument("the recall deadline must be a positive number of seconds")
        return cls(chosen, seconds)


def open_host(locations: Locations, **options: Any) -> Host:
    """The reference host over the configured memory and knowledge databases."""
    locations.prepare()  # refuse a missing location before opening (and creating) the other
    return Host(
        open_memory_store(locations),
        open_knowledge_store(locations),
        open_host_registry(locations),
        **options,
    )


def open_agent_host(
    locations: Locations,
    recall: RecallConfig | None = None,
    *,
    public_url: str = "",
    owner_token_command: str | None = None,
    catch_up_every: float = 1.0,
) -> Host:
    """The host ``oh serve`` and ``oh mcp`` serve agents from: recall as ``recall`` says
    (``RecallConfig.resolve`` by default: ``--recall`` / ``OH_RECALL``), with its deadline and,
    when enabled, the catch-up loop running. ``Host.stop`` ends it; ``close_host`` closes all."""
    locations.prepare()  # refuse a missing location before recall opens (and creates) one
    config = recall or RecallConfig.resolve(locations)
    service = open_recall(locations) if config.enabled else None
    settings = HostSettings(public_url=public_url, recall_shadow=config.shadow)
    if owner_token_command is not None:
        settings = replace(settings, owner_token_command=owner_token_command)
    if config.deadline is not None:
        settings = replace(settings, recall_deadline=timedelta(seconds=config.deadline))
    host = open_host(locations, settings=settings, recall=service)
    if service is not None:
        host.start_catch_up(catch_up_every)
    return host


def close_host(host: Host) -> None:
    """Stop ``host``'s background work, then close its stores and its recall service's.

    The recall service's stores stay open if a background thread still uses them (it is
    waiting for a slow embedder): closing a libSQL connection under a thread that then uses
    it aborts that thread noisily. The process is ending anyway."""
    stopped = host.stop()
    host.close(close_recall if stopped else None)
