"""uvicorn serving an ASGI app from a daemon thread with its own event loop: the simulator's API server and the
loopback Azure stand-ins run this way inside a test process."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any


def listen(host: str = "127.0.0.1", port: int = 0, backlog: int = 64) -> socket.socket:
    """A non-blocking listening TCP socket on ``host:port`` (0: a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


class UvicornThread:
    """Serve ``app`` on ``sock`` (closed when the server ends); ``what`` names it in start-up errors."""

    def __init__(self, app: Any, sock: socket.socket, *, name: str, what: str, **config: Any) -> None:
        import uvicorn

        self.sock, self.what = sock, what
        # "critical": the apps answer their own errors; what reaches uvicorn is an injected connection drop
        options = {"lifespan": "off", "log_level": "critical", "access_log": False, "ws": "none",
                   "timeout_graceful_shutdown": 1, **config}
        self.server = uvicorn.Server(uvicorn.Config(app, **options))
        self.loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self.server.serve(sockets=[self.sock]))
        except BaseException as exc:  # surfaced by start()
            self._error = exc
        finally:
            self.sock.close()
            loop.close()

    def start(self, timeout: float = 10.0) -> None:
        """Start serving; returns once uvicorn accepts connections (RuntimeError when it cannot)."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the {self.what} did not start: {self._error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {self.what} did not start within {timeout:g} s")
            time.sleep(0.002)

    def call_soon(self, callback: Any) -> None:
        """Run ``callback`` on the server's loop (nothing once the loop has closed)."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(callback)
            except RuntimeError:
                pass

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=timeout)
