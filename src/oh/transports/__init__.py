"""The transports: HTTP (with its OpenAPI description), MCP and the owner's panel. Each is a thin
adapter over ``oh.host.Host``; nothing below imports them."""
