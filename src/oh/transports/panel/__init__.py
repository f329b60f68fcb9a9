"""The Memory panel and the review page (docs/panel.md): server-rendered HTML for owners.

``panel_router(host)`` is a FastAPI router the reference host includes in its app;
``owner_from_request(host, request)`` authenticates an owner by bearer token or by the panel's
session cookie (GET and HEAD only), for read-only API routes the panel's script uses, such as
the notebook's event stream. See docs/panel.md.
"""

from oh.transports.panel.memory import anchor
from oh.transports.panel.routes import PanelCompression, panel_router
from oh.transports.panel.sessions import SESSION_COOKIE, PanelSessions, owner_from_request

__all__ = [
    "SESSION_COOKIE",
    "PanelCompression",
    "PanelSessions",
    "anchor",
    "owner_from_request",
    "panel_router",
]
