"""asyncio variant of the client: the same methods, as coroutines.

It is a thin layer over the synchronous client: each call runs in a worker
thread with ``asyncio.to_thread`` (the loop's default executor), so it
needs no third-party HTTP library and behaves exactly like the sync client.
Streaming callbacks (``on_stdout``, ``on_stderr``, ``on_log``, ...) are
delivered on the event loop, in order, as output arrives; a callback may be
a plain function or a coroutine function (scheduled as a task). If a
callback raises, the command's stream is closed (which kills a foreground
command) and the exception is raised by the awaited call.

Each running call occupies one executor thread (the default executor has
``min(32, cpus + 4)`` threads): to run many long commands concurrently,
``loop.set_default_executor(ThreadPoolExecutor(max_workers=N))``.
Cancelling the awaiting task does not stop the call already running in its
thread.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Union

from . import errors
from ._aioterminal import AsyncTerminal
from ._models import CreatedKey, ExecResult, FileInfo, Key, ProcessInfo, Snapshot, Template
from .client import (DEFAULT_TIMEOUT, BackgroundProcess, Filesystem, PandaStack, Sandbox,
                     default_client)

__all__ = ["AsyncPandaStack", "AsyncSandboxes", "AsyncSandbox", "AsyncFilesystem",
           "AsyncBackgroundProcess", "AsyncTerminal"]

_CALLBACKS = ("on_stdout", "on_stderr", "on_stdout_bytes", "on_stderr_bytes", "on_log")


async def _run(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """Runs fn in a worker thread, delivering its callbacks on this loop."""
    loop = asyncio.get_running_loop()
    failed: List[BaseException] = []
    for name in _CALLBACKS:
        if kw.get(name) is not None:
            kw[name] = _on_loop(loop, kw[name], failed)
    result = await asyncio.to_thread(fn, *args, **kw)
    # Every callback queued by the worker has run by now (FIFO): one that
    # raised after the last chunk still fails the call.
    if failed:
        raise failed[0]
    return result


def _on_loop(loop: asyncio.AbstractEventLoop, cb: Callable[[Any], Any],
             failed: List[BaseException]) -> Callable[[Any], None]:
    def deliver(x: Any) -> None:
        if failed:
            return
        try:
            r = cb(x)
            if inspect.isawaitable(r):
                asyncio.ensure_future(r)
        except BaseException as e:  # re-raised in the worker, ending the stream
            failed.append(e)

    def from_worker(x: Any) -> None:
        if failed:
            raise failed[0]
        loop.call_soon_threadsafe(deliver, x)

    return from_worker


class AsyncPandaStack:
    """Async client; same arguments as :class:`pandastack.PandaStack`."""

    def __init__(self, token: Optional[str] = None, base_url: Optional[str] = None, *,
                 api_key: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 ssl_context: Any = None, sync_client: Optional[PandaStack] = None):
        self.sync = sync_client or PandaStack(token, base_url, api_key=api_key, timeout=timeout,
                                              ssl_context=ssl_context)
        self.sandboxes = AsyncSandboxes(self)
        self.volumes = AsyncVolumes(self)
        self.apps = AsyncApps(self)

    @property
    def base_url(self) -> str:
        return self.sync.base_url

    async def __aenter__(self) -> "AsyncPandaStack":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.sync.close()

    async def health(self) -> Dict[str, Any]:
        return await _run(self.sync.health)

    async def ca_certificate(self) -> str:
        return await _run(self.sync.ca_certificate)

    async def templates(self) -> List[Template]:
        return await _run(self.sync.templates)

    async def build_template(self, name: str, on_log: Any = None, **kw: Any) -> Template:
        return await _run(self.sync.build_template, name, on_log=on_log, **kw)

    async def template_versions(self, name: str) -> List[Dict[str, Any]]:
        return await _run(self.sync.template_versions, name)

    async def export_snapshot(self, snapshot_id: str) -> Snapshot:
        return await _run(self.sync.export_snapshot, snapshot_id)

    async def import_snapshot(self, object_key: str, name: Optional[str] = None) -> Snapshot:
        return await _run(self.sync.import_snapshot, object_key, name)

    async def create_key(self, team: str, name: Optional[str] = None) -> CreatedKey:
        return await _run(self.sync.create_key, team, name)

    async def list_keys(self, team: Optional[str] = None) -> List[Key]:
        return await _run(self.sync.list_keys, team)

    async def revoke_key(self, key_id: str) -> None:
        return await _run(self.sync.revoke_key, key_id)

    async def rotate_key(self, key_id: str) -> CreatedKey:
        return await _run(self.sync.rotate_key, key_id)

    async def quotas(self, team: Optional[str] = None) -> Dict[str, Any]:
        return await _run(self.sync.quotas, team)

    async def set_quotas(self, team: str, **limits: Any) -> Dict[str, Any]:
        return await _run(self.sync.set_quotas, team, **limits)


class AsyncSandboxes:
    def __init__(self, client: AsyncPandaStack):
        self._c = client

    async def create(self, template: str = "base", **kw: Any) -> "AsyncSandbox":
        return AsyncSandbox(await _run(self._c.sync.sandboxes.create, template, **kw))

    async def get(self, sandbox_id: str) -> "AsyncSandbox":
        return AsyncSandbox(await _run(self._c.sync.sandboxes.get, sandbox_id))

    def connect(self, sandbox_id: str) -> "AsyncSandbox":
        return AsyncSandbox(self._c.sync.sandboxes.connect(sandbox_id))

    async def list(self, **kw: Any) -> List["AsyncSandbox"]:
        return [AsyncSandbox(s) for s in await _run(self._c.sync.sandboxes.list, **kw)]


class AsyncVolumes:
    """``client.volumes``, async: see :class:`pandastack.Volumes`."""

    def __init__(self, client: AsyncPandaStack):
        self._c = client

    async def create(self, name: str, size_mib: int) -> Dict[str, Any]:
        return await _run(self._c.sync.volumes.create, name, size_mib)

    async def list(self) -> List[Dict[str, Any]]:
        return await _run(self._c.sync.volumes.list)

    async def get(self, id_or_name: str) -> Dict[str, Any]:
        return await _run(self._c.sync.volumes.get, id_or_name)

    async def delete(self, id_or_name: str) -> None:
        await _run(self._c.sync.volumes.delete, id_or_name)


class AsyncApps:
    """``client.apps``, async: see :class:`pandastack.client.Apps`."""

    def __init__(self, client: AsyncPandaStack):
        self._c = client

    async def create(self, name: str, git_url: Optional[str] = None, **kw: Any) -> Dict[str, Any]:
        return await _run(self._c.sync.apps.create, name, git_url, **kw)

    async def list(self) -> List[Dict[str, Any]]:
        return await _run(self._c.sync.apps.list)

    async def get(self, name: str) -> Dict[str, Any]:
        return await _run(self._c.sync.apps.get, name)

    async def delete(self, name: str) -> None:
        await _run(self._c.sync.apps.delete, name)

    async def deploy(self, name: str, ref: Optional[str] = None) -> Dict[str, Any]:
        return await _run(self._c.sync.apps.deploy, name, ref)

    async def deploys(self, name: str) -> List[Dict[str, Any]]:
        return await _run(self._c.sync.apps.deploys, name)

    async def previews(self, name: str) -> List[Dict[str, Any]]:
        return await _run(self._c.sync.apps.previews, name)

    async def get_deploy(self, name: str, deploy_id: str) -> Dict[str, Any]:
        return await _run(self._c.sync.apps.get_deploy, name, deploy_id)

    async def logs(self, name: str, deploy_id: str) -> str:
        return await _run(self._c.sync.apps.logs, name, deploy_id)

    async def wait_deploy(self, name: str, deploy_id: str, *, timeout: Optional[float] = 900.0,
                          poll_interval: float = 1.0) -> Dict[str, Any]:
        deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
        while True:
            d = await self.get_deploy(name, deploy_id)
            if d.get("status") in ("live", "failed", "superseded"):
                return d
            if deadline is not None and asyncio.get_running_loop().time() >= deadline:
                raise errors.RequestTimeoutError(
                    f"deploy {deploy_id} of app {name} still {d.get('status')} after {timeout}s")
            await asyncio.sleep(poll_interval)

    async def rollback(self, name: str, deploy_id: Optional[str] = None) -> Dict[str, Any]:
        return await _run(self._c.sync.apps.rollback, name, deploy_id)

    async def git_remote_url(self, name: str, *, with_key: bool = False) -> str:
        return await _run(self._c.sync.apps.git_remote_url, name, with_key=with_key)


def _client(client: Optional[AsyncPandaStack]) -> PandaStack:
    return client.sync if client is not None else default_client()


class AsyncSandbox:
    """Async handle on a sandbox. Attributes (id, state, accel, metadata,
    expires_at, ...) are those of the wrapped :class:`pandastack.Sandbox`
    (``.sync``). ``async with`` kills it at the end of the block."""

    def __init__(self, sandbox: Sandbox):
        self.sync = sandbox
        self.filesystem = AsyncFilesystem(sandbox.filesystem)

    def __getattr__(self, name: str) -> Any:  # data attributes of the sync sandbox
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.sync, name)

    def __repr__(self) -> str:
        return "Async" + repr(self.sync)

    @property
    def files(self) -> "AsyncFilesystem":
        return self.filesystem

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.kill()

    @classmethod
    async def create(cls, template: str = "base", *, client: Optional[AsyncPandaStack] = None,
                     **kw: Any) -> "AsyncSandbox":
        """Like Sandbox.create (default client from the environment)."""
        return cls(await _run(_client(client).sandboxes.create, template, **kw))

    @classmethod
    async def get(cls, sandbox_id: str, *, client: Optional[AsyncPandaStack] = None) -> "AsyncSandbox":
        return cls(await _run(_client(client).sandboxes.get, sandbox_id))

    @classmethod
    async def list(cls, *, client: Optional[AsyncPandaStack] = None, **kw: Any) -> List["AsyncSandbox"]:
        return [cls(s) for s in await _run(_client(client).sandboxes.list, **kw)]

    async def exec(self, cmd: Union[str, Sequence[str]], **kw: Any) -> Any:
        """Like Sandbox.exec; callbacks are delivered on the event loop.
        With background=True returns an AsyncBackgroundProcess."""
        r = await _run(self.sync.exec, cmd, **kw)
        return AsyncBackgroundProcess(self, r) if isinstance(r, BackgroundProcess) else r

    async def run_code(self, code: str, language: str = "python", **kw: Any) -> Any:
        """Like Sandbox.run_code."""
        return await _run(self.sync.run_code, code, language, **kw)

    async def code_contexts(self) -> Any:
        return await _run(self.sync.code_contexts)

    async def attach(self, pid: int, **kw: Any) -> ExecResult:
        return await _run(self.sync.attach, pid, **kw)

    async def signal(self, pid: int, signal: Union[str, int] = "TERM") -> None:
        await _run(self.sync.signal, pid, signal)

    async def processes(self) -> List[ProcessInfo]:
        return await _run(self.sync.processes)

    async def refresh(self) -> "AsyncSandbox":
        await _run(self.sync.refresh)
        return self

    async def kill(self) -> None:
        await _run(self.sync.kill)

    async def open_terminal(self, cmd: Optional[str] = None, **kw: Any) -> "AsyncTerminal":
        """Like Sandbox.open_terminal (rows, cols, user, cwd, envs); see
        :class:`AsyncTerminal`."""
        return AsyncTerminal(await _run(self.sync.open_terminal, cmd, **kw))

    async def reattach_terminal(self, session_id: str, offset: int = 0) -> "AsyncTerminal":
        """Connects to a terminal session again (``offset``: bytes already read)."""
        return AsyncTerminal(await _run(self.sync.reattach_terminal, session_id, offset))

    async def get_network(self) -> Dict[str, Any]:
        return await _run(self.sync.get_network)

    async def set_network(self, policy: Dict[str, Any]) -> Dict[str, Any]:
        return await _run(self.sync.set_network, policy)

    async def sign_port_url(self, port: int, expires_in_seconds: Optional[int] = None) -> Dict[str, Any]:
        return await _run(self.sync.sign_port_url, port, expires_in_seconds)

    async def set_ttl(self, ttl_seconds: int) -> "AsyncSandbox":
        await _run(self.sync.set_ttl, ttl_seconds)
        return self

    async def ping(self) -> float:
        return await _run(self.sync.ping)

    async def snapshot(self) -> Dict[str, Any]:
        return await _run(self.sync.snapshot)

    async def fork(self) -> "AsyncSandbox":
        return AsyncSandbox(await _run(self.sync.fork))

    async def hibernate(self) -> "AsyncSandbox":
        await _run(self.sync.hibernate)
        return self

    async def wake(self) -> "AsyncSandbox":
        await _run(self.sync.wake)
        return self


class AsyncBackgroundProcess:
    def __init__(self, sandbox: AsyncSandbox, proc: BackgroundProcess):
        self.sandbox = sandbox
        self.sync = proc
        self.pid = proc.pid

    def __repr__(self) -> str:
        return "Async" + repr(self.sync)

    async def attach(self, **kw: Any) -> ExecResult:
        return await self.sandbox.attach(self.pid, **kw)

    wait = attach

    async def signal(self, signal: Union[str, int] = "TERM") -> None:
        await self.sandbox.signal(self.pid, signal)

    async def kill(self) -> None:
        await self.sandbox.signal(self.pid, "KILL")


class AsyncFilesystem:
    """Async ``sandbox.filesystem``; same methods as pandastack.Filesystem.
    read_to and write(fileobj) run the (blocking) file object in the worker
    thread."""

    def __init__(self, fs: Filesystem):
        self.sync = fs

    async def read(self, path: str, format: str = "text", encoding: str = "utf-8",
                   errors: str = "strict") -> Any:
        """As Filesystem.read; ``format="stream"`` gives an async iterator."""
        if format == "stream":
            return self.read_stream(path)
        return await _run(self.sync.read, path, format, encoding, errors)

    async def read_stream(self, path: str) -> AsyncIterator[bytes]:
        """A file's contents as an async iterator of byte chunks."""
        it = self.sync.read_stream(path)
        end = object()
        try:
            while True:
                b = await asyncio.to_thread(next, it, end)
                if b is end:
                    return
                yield b
        finally:
            await asyncio.to_thread(it.close)

    async def read_bytes(self, path: str) -> bytes:
        return await _run(self.sync.read_bytes, path)

    async def read_to(self, path: str, fileobj: Any) -> int:
        return await _run(self.sync.read_to, path, fileobj)

    async def write(self, path: str, data: Any, mode: Union[int, str, None] = None) -> FileInfo:
        return await _run(self.sync.write, path, data, mode)

    async def list(self, path: str) -> List[FileInfo]:
        return await _run(self.sync.list, path)

    async def stat(self, path: str) -> FileInfo:
        return await _run(self.sync.stat, path)

    async def exists(self, path: str) -> bool:
        return await _run(self.sync.exists, path)

    async def make_dir(self, path: str) -> None:
        await _run(self.sync.make_dir, path)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await _run(self.sync.remove, path, recursive)

    async def rename(self, src: str, dst: str) -> None:
        await _run(self.sync.rename, src, dst)
