"""HTTP transport: http.client with keep-alive connections kept per thread.

Each thread has its own small set of idle connections, so a client object
can be shared by threads (and by asyncio.to_thread workers) safely. A
connection busy with a stream is not idle, so a callback that makes another
call while a stream is being read gets a second connection.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import weakref
from typing import Any, Iterable, Iterator, Optional
from urllib.parse import quote, urlencode, urlsplit

from . import errors

_MAX_IDLE = 4
_ERROR_BODY_LIMIT = 64 << 10
CHUNK = 256 << 10

# Errors that mean a reused keep-alive connection had been closed by the
# server before our request reached it: safe to retry once on a new one.
_STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError,
          ConnectionAbortedError, http.client.BadStatusLine)

_UNSET: Any = object()


class Response:
    """A successful (2xx) response whose body has not been read yet."""

    def __init__(self, transport: "Transport", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse):
        self._t = transport
        self._conn = conn
        self.raw = resp
        self.status = resp.status
        self.headers = resp.headers
        self.request_id = resp.getheader("X-Request-Id")
        self._done = False

    def read(self, n: int = -1) -> bytes:
        try:
            return self.raw.read() if n < 0 else self.raw.read(n)
        except socket.timeout as e:
            raise errors.RequestTimeoutError(f"timed out reading the response: {e}",
                                             request_id=self.request_id) from e
        except (http.client.IncompleteRead, OSError, http.client.HTTPException) as e:
            raise errors.APIConnectionError(f"response cut off: {e!r}",
                                            request_id=self.request_id) from e

    def read1(self, n: int = CHUNK) -> bytes:
        try:
            return self.raw.read1(n)
        except socket.timeout as e:
            raise errors.RequestTimeoutError(f"timed out reading the response: {e}",
                                             request_id=self.request_id) from e
        except (http.client.IncompleteRead, OSError, http.client.HTTPException) as e:
            raise errors.APIConnectionError(f"response cut off: {e!r}",
                                            request_id=self.request_id) from e

    def lines(self) -> Iterator[bytes]:
        """Yields the body's lines (NDJSON) as soon as each one arrives."""
        while True:
            try:
                line = self.raw.readline()
            except socket.timeout as e:
                raise errors.RequestTimeoutError(f"timed out reading the stream: {e}",
                                                 request_id=self.request_id) from e
            except (http.client.IncompleteRead, OSError, http.client.HTTPException) as e:
                raise errors.APIConnectionError(f"stream cut off: {e!r}",
                                                request_id=self.request_id) from e
            if not line:
                return
            if line.strip():
                yield line

    def json(self) -> Any:
        body = self.read()
        self.close()
        if not body.strip():
            return None
        try:
            return json.loads(body)
        except ValueError as e:
            raise errors.PandaStackError(f"invalid JSON in the answer: {e}", status=self.status,
                                         request_id=self.request_id) from e

    def close(self) -> None:
        """Releases the connection: back to the idle set if the body was read
        to its end, else closed (for a command stream, closing kills it)."""
        if self._done:
            return
        self._done = True
        if self.raw.isclosed() and not self.raw.will_close:
            self._t._release(self._conn)
        else:
            self.raw.close()
            self._conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Transport:
    def __init__(self, base_url: str, token: Optional[str], timeout: Optional[float],
                 user_agent: str, ssl_context: Optional[ssl.SSLContext] = None):
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"pandastack: invalid base URL {base_url!r}")
        self.base_url = base_url
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self._token = token
        self.timeout = timeout
        self._ua = user_agent
        self._ssl = ssl_context
        self._local = threading.local()
        # Every connection, so they are closed when the transport is
        # collected (or at exit), whichever thread's idle set holds them.
        self._all: list = []
        self._all_lock = threading.Lock()
        weakref.finalize(self, _close_all, self._all)

    # -- connections -------------------------------------------------------

    def _idle(self) -> list:
        idle = getattr(self._local, "idle", None)
        if idle is None:
            idle = self._local.idle = []
        return idle

    def _new_conn(self) -> http.client.HTTPConnection:
        if self._https:
            ctx = self._ssl or ssl.create_default_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                self._host, self._port, context=ctx)
        else:
            conn = http.client.HTTPConnection(self._host, self._port)
        with self._all_lock:
            self._all[:] = [c for c in self._all if c.sock is not None]
            self._all.append(conn)
        return conn

    def _release(self, conn: http.client.HTTPConnection) -> None:
        idle = self._idle()
        if len(idle) < _MAX_IDLE:
            idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        """Closes the calling thread's idle connections."""
        idle = self._idle()
        while idle:
            idle.pop().close()

    # -- requests ----------------------------------------------------------

    def url(self, path: str, query: Optional[dict] = None) -> str:
        u = self._prefix + path
        if query:
            u += "?" + urlencode(query, quote_via=quote, safe="")
        return u

    def request(self, method: str, path: str, *, query: Optional[dict] = None,
                json_body: Any = None, body: Any = None, accept: str = "application/json",
                timeout: Optional[float] = _UNSET,
                content_type: str = "application/octet-stream") -> Response:
        """Sends a request and returns its 2xx response, unread; raises the
        typed error for any other status. ``body`` may be bytes or an
        iterable of bytes (sent chunked, never held whole in memory)."""
        headers = {"User-Agent": self._ua, "Accept": accept}
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        replayable = True
        if json_body is not None:
            body = json.dumps(json_body, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        elif body is not None:
            headers["Content-Type"] = content_type
            if isinstance(body, (bytes, bytearray, memoryview)):
                headers["Content-Length"] = str(len(body))
            else:
                replayable = False  # an iterator: http.client sends it chunked
                headers["Transfer-Encoding"] = "chunked"
        elif method in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = "0"
        url = self.url(path, query)
        t = self.timeout if timeout is _UNSET else timeout

        for attempt in (0, 1):
            idle = self._idle()
            reused = bool(idle)
            conn = idle.pop() if reused else self._new_conn()
            conn.timeout = t
            if conn.sock is not None:
                conn.sock.settimeout(t)
            try:
                try:
                    conn.request(method, url, body=body, headers=headers,
                                 encode_chunked=not replayable)
                except (BrokenPipeError, ConnectionResetError):
                    # The server may have answered (e.g. an error) and stopped
                    # reading our streamed body: try to read that answer.
                    if replayable:
                        raise
                resp = conn.getresponse()
            except _STALE as e:
                conn.close()
                if reused and replayable and attempt == 0:
                    continue
                raise errors.APIConnectionError(f"{method} {path}: connection lost: {e!r}") from e
            except socket.timeout as e:
                conn.close()
                raise errors.RequestTimeoutError(f"{method} {path}: timed out after {t}s") from e
            except OSError as e:
                conn.close()
                raise errors.APIConnectionError(
                    f"{method} {path}: cannot reach {self.base_url}: {e}") from e
            except BaseException:
                conn.close()
                raise
            break

        if 200 <= resp.status < 300:
            return Response(self, conn, resp)
        try:
            data = resp.read(_ERROR_BODY_LIMIT)
        except (OSError, http.client.HTTPException):
            data = b""
        rid = resp.getheader("X-Request-Id")
        retry_after = errors.parse_retry_after(resp.getheader("Retry-After"))
        if resp.isclosed() and not resp.will_close:
            self._release(conn)
        else:
            resp.close()
            conn.close()
        raise errors.error_from_response(resp.status, data, rid, resp.reason, retry_after)

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """Sends a request and returns its decoded JSON answer (or None)."""
        return self.request(method, path, **kw).json()


def _close_all(conns: list) -> None:
    for conn in conns:
        try:
            conn.close()
        except Exception:
            pass
    conns.clear()


def iter_file(f: Any, chunk: int = CHUNK) -> Iterable[bytes]:
    """Reads a file object in chunks (text files are encoded as UTF-8)."""
    while True:
        b = f.read(chunk)
        if not b:
            return
        if isinstance(b, str):
            b = b.encode("utf-8")
        yield bytes(b) if not isinstance(b, bytes) else b
