"""An MCP server over stdio on the official Python SDK (`mcp` 2.3 low-level `Server`), both eras.

The SDK's `Server.run` serves whichever era the client's first message picks: a legacy
`initialize` pins the connection to the handshake era (`tools.listChanged` declared, list_changed
sent on the pipe), a modern request (per-request `_meta`) to 2026-07-28 (`server/discover`,
`tools/list` with ttlMs/cacheScope, `subscriptions/listen` on an `InMemorySubscriptionBus`).
An announced swap sends list_changed on whichever channel the connection has: the legacy session,
or every open listen stream. The catalog (14 tools, `--page-size`, the swap) is kb_catalog.py's.

There is no admin endpoint on a pipe: `--swap-after S` swaps once; SIGUSR1 swaps now (announced),
SIGUSR2 swaps now (unannounced). Diagnostics go to stderr, never stdout.

Usage: python py_stdio_server.py [--page-size 8] [--swap-after S] [--unannounced]
                                 [--ttl-ms 60000] [--cache-scope public|private]
"""

import logging
import signal

import anyio
from kb_catalog import Catalog, LegacySessions, arguments, server_handlers
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.stdio import stdio_server


async def on_signals(catalog: Catalog) -> None:
    with anyio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2) as signals:
        async for signum in signals:
            await catalog.swap(announce=signum == signal.SIGUSR1)


async def serve(args) -> None:
    catalog = Catalog(args.page_size)
    # one connection per process: a single legacy recipient
    server = Server("ci-py-stdio", version="1.0.0",
                    **server_handlers(catalog, LegacySessions(), lambda ctx: "stdio", modern=args))
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with anyio.create_task_group() as tg:
        tg.start_soon(catalog.swap_later, args.swap_after, not args.unannounced)
        tg.start_soon(on_signals, catalog)
        async with stdio_server() as (read, write):
            await server.run(read, write, options)
        tg.cancel_scope.cancel()


def main() -> None:
    args = arguments("stdio Python SDK peer (mcp 2.3 low-level Server, both eras)", port=False)
    logging.basicConfig(level=logging.WARNING)
    anyio.run(serve, args)


if __name__ == "__main__":
    main()
