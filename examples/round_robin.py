"""A round-robin TCP proxy in front of several ``oh serve`` processes (docs/postgres.md).

    python examples/round_robin.py LISTEN_PORT BACKEND_PORT [BACKEND_PORT ...]

Each new connection goes to the next server in turn, and to the one after it when that one
does not answer. Oh's servers keep no state of their own (the databases hold everything), so
any connection may go to any server. This is for trying a deployment on one machine; in
production use the load balancer you already run (HAProxy, nginx, a cloud load balancer) with
a health check on ``/healthz``.
"""

from __future__ import annotations

import asyncio
import itertools
import sys

HOST = "127.0.0.1"


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def main(listen: int, backends: list[int]) -> None:
    turn = itertools.cycle(backends)

    async def handle(client_reader: asyncio.StreamReader, client: asyncio.StreamWriter) -> None:
        for _ in backends:
            try:
                reader, writer = await asyncio.open_connection(HOST, next(turn))
            except OSError:
                continue  # that server is down: the next one
            await asyncio.gather(pipe(client_reader, writer), pipe(reader, client))
            return
        client.close()

    server = await asyncio.start_server(handle, HOST, listen)
    print(f"proxy on http://{HOST}:{listen} -> ports {', '.join(map(str, backends))}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) < 3 or not all(arg.isdigit() for arg in sys.argv[1:]):
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), [int(arg) for arg in sys.argv[2:]]))
