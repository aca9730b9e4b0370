"""One port, two protocols: plain HTTP for tests and tools, HTTPS for kubectl.

devhub's URL is `http://127.0.0.1:PORT` (simple for tests and the kubernetes client), but kubectl
sends a token only over TLS. Rather than two ports, the listener peeks at the first byte of each
connection: a TLS handshake record (0x16) gets TLS, anything else is served as plain HTTP. Both
kinds end in the same aiohttp protocol factory, so every request sees the same server."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable
from typing import Final

__all__ = ["DualProtocolListener"]

TLS_HANDSHAKE: Final = 0x16
FIRST_BYTE_TIMEOUT: Final = 30.0
TLS_HANDSHAKE_TIMEOUT: Final = 10.0
BACKLOG: Final = 512


class DualProtocolListener:
    """Accepts connections on (host, port) and hands each to `factory`, over TLS or not."""

    def __init__(
        self,
        factory: Callable[[], asyncio.BaseProtocol],
        ssl_context: ssl.SSLContext,
        host: str,
        port: int,
    ) -> None:
        self._factory = factory
        self._ssl = ssl_context
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("listener is not started")
        port: int = self._sock.getsockname()[1]
        return port

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server(
            (self._host, self._port), family=family, backlog=BACKLOG, reuse_port=False
        )
        sock.setblocking(False)
        self._sock = sock
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(sock))

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except OSError:
                if self._sock is None:
                    return
                await asyncio.sleep(0.05)  # e.g. out of file descriptors: back off, go on
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = loop.create_task(self._serve(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()

        def on_readable() -> None:
            if not readable.done():
                readable.set_result(None)

        loop.add_reader(conn.fileno(), on_readable)
        try:
            await asyncio.wait_for(readable, FIRST_BYTE_TIMEOUT)
            first = conn.recv(1, socket.MSG_PEEK)
        except (TimeoutError, OSError):
            conn.close()
            return
        finally:
            loop.remove_reader(conn.fileno())
        if not first:
            conn.close()
            return
        use_tls = first[0] == TLS_HANDSHAKE
        try:
            await loop.connect_accepted_socket(
                self._factory,
                conn,
                ssl=self._ssl if use_tls else None,
                ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT if use_tls else None,
            )
        except (OSError, ssl.SSLError, TimeoutError):
            conn.close()  # a failed handshake is the client's problem, not the server's

    async def close(self) -> None:
        sock, self._sock = self._sock, None
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        for task in list(self._pending):
            task.cancel()
        if sock is not None:
            sock.close()
