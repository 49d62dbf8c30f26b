"""asyncio terminals: ``AsyncTerminal`` drives the synchronous ``Terminal``
(``_terminal.py``) from worker threads, as the rest of ``pandastack.aio``
drives the sync client, so it behaves exactly like it: the same WebSocket,
the same reattach when the connection drops, the same session ids.

One read at a time (``read``, or ``async for``) occupies one executor
thread while it waits for output; writes, resizes and signals may be
awaited while a read is pending.
"""

from __future__ import annotations

import asyncio
from typing import Any, Optional

from ._terminal import Terminal


class AsyncTerminal:
    """An interactive terminal in a sandbox, for asyncio. ``await read()``
    returns output bytes (``b""`` once the command has ended: ``exit_code``
    then says how); ``await write()`` types input; ``async for chunk in
    term`` reads to the end. ``await close()`` drops the connection and
    leaves the session for ``AsyncSandbox.reattach_terminal`` within
    ``grace_seconds``."""

    def __init__(self, term: Terminal):
        self.sync = term

    @property
    def session_id(self) -> str:
        return self.sync.session_id

    @property
    def pid(self) -> int:
        return self.sync.pid

    @property
    def grace_seconds(self) -> int:
        return self.sync.grace_seconds

    @property
    def offset(self) -> int:
        return self.sync.offset

    @property
    def exit_code(self) -> Optional[int]:
        return self.sync.exit_code

    @property
    def signal(self) -> Optional[str]:
        return self.sync.signal

    def __repr__(self) -> str:
        return f"AsyncTerminal(session_id={self.session_id!r}, pid={self.pid})"

    async def read(self) -> bytes:
        return await asyncio.to_thread(self.sync.read)

    async def write(self, data: Any) -> None:
        await asyncio.to_thread(self.sync.write, data)

    async def resize(self, rows: int, cols: int) -> None:
        await asyncio.to_thread(self.sync.resize, rows, cols)

    async def send_signal(self, signal: str) -> None:
        """To the terminal's foreground job, as ^C would (e.g. ``"INT"``)."""
        await asyncio.to_thread(self.sync.send_signal, signal)

    async def kill(self) -> None:
        await asyncio.to_thread(self.sync.kill)

    async def wait(self) -> Optional[int]:
        """Reads to the end; returns the exit code."""
        return await asyncio.to_thread(self.sync.wait)

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    def __aiter__(self) -> "AsyncTerminal":
        return self

    async def __anext__(self) -> bytes:
        b = await self.read()
        if not b:
            raise StopAsyncIteration
        return b

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
