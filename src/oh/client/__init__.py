"""Oh's HTTP API from Python: ``Client`` (blocking) and ``AsyncClient`` (asyncio or trio), on
httpx alone (``pip install 'oh-memory[client]'``); importing this package never imports the server.

Every route of docs/http.md is one typed method; its result is the JSON the server answers, as
a typed dictionary (``oh.client._types``). Every failure is an ``oh.errors.OhError`` with the
code the server sent (``error_for_code``); an answer that is not Oh's (a proxy's page, a cut
body, a reset connection) is ``StorageUnavailable``. What is safe to send again is retried
(``Retry``), and a ``remember`` always carries a request id, the same on every try, so it is
applied at most once. docs/client.md is the user's page.
"""

from oh.client._async import AsyncClient, AsyncMemoryCards
from oh.client._sync import Client, MemoryCards
from oh.client._types import (
    Bootstrap,
    BootstrapRow,
    CitedSource,
    DecisionMade,
    DecisionStamp,
    Document,
    Explanation,
    Forgotten,
    ForgottenNote,
    FullRecord,
    Health,
    KnowledgeAt,
    ListedNotebook,
    MemoryCard,
    NotebookObject,
    NotebookPage,
    NotebookState,
    Opened,
    ProposalMade,
    QueryAnswer,
    QueryRow,
    Recalled,
    RecalledRow,
    Records,
    RememberApplied,
    Remembered,
    RememberRefused,
    RemovedDocument,
    WrittenName,
)
from oh.client._wire import (
    DEFAULT_TIMEOUT,
    EVENTS_READ_TIMEOUT,
    MAX_BODY_BYTES,
    Retry,
    new_request_id,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS_READ_TIMEOUT",
    "MAX_BODY_BYTES",
    "AsyncClient",
    "AsyncMemoryCards",
    "Bootstrap",
    "BootstrapRow",
    "CitedSource",
    "Client",
    "DecisionMade",
    "DecisionStamp",
    "Document",
    "Explanation",
    "Forgotten",
    "ForgottenNote",
    "FullRecord",
    "Health",
    "KnowledgeAt",
    "ListedNotebook",
    "MemoryCard",
    "MemoryCards",
    "NotebookObject",
    "NotebookPage",
    "NotebookState",
    "Opened",
    "ProposalMade",
    "QueryAnswer",
    "QueryRow",
    "Recalled",
    "RecalledRow",
    "Records",
    "RememberApplied",
    "RememberRefused",
    "Remembered",
    "RemovedDocument",
    "Retry",
    "WrittenName",
    "new_request_id",
]
