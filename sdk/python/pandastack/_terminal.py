"""Interactive terminals (GET /v1/sandboxes/{id}/pty, a WebSocket).

The SDK has no dependencies, so this holds the small part of RFC 6455 a
client needs: the upgrade, masked frames out, frames in, ping and close.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import struct
import threading
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlencode, urlsplit

from . import errors

_BIN, _TEXT, _CLOSE, _PING, _PONG, _CONT = 0x2, 0x1, 0x8, 0x9, 0xA, 0x0


class _WebSocket:
    def __init__(self, url: str, headers: Dict[str, str], timeout: Optional[float],
                 ssl_context: Optional[ssl.SSLContext]):
        u = urlsplit(url)
        tls = u.scheme == "https"
        port = u.port or (443 if tls else 80)
        try:
            sock = socket.create_connection((u.hostname, port), timeout=timeout)
            if tls:
                sock = (ssl_context or ssl.create_default_context()).wrap_socket(
                    sock, server_hostname=u.hostname)
        except OSError as e:
            raise errors.APIConnectionError(f"connect to {u.hostname}:{port}: {e}") from e
        self._sock = sock
        self._wlock = threading.Lock()
        key = base64.b64encode(os.urandom(16)).decode()
        path = u.path + ("?" + u.query if u.query else "")
        lines = [f"GET {path} HTTP/1.1", f"Host: {u.netloc}", "Connection: Upgrade",
                 "Upgrade: websocket", "Sec-WebSocket-Version: 13", f"Sec-WebSocket-Key: {key}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self._buf = b""
        while b"\r\n\r\n" not in self._buf:
            chunk = sock.recv(65536)
            if not chunk:
                raise errors.APIConnectionError("the server closed the connection during the upgrade")
            self._buf += chunk
        head, self._buf = self._buf.split(b"\r\n\r\n", 1)
        status_line, *hdrs = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        hmap = {h.split(":", 1)[0].strip().lower(): h.split(":", 1)[1].strip() for h in hdrs if ":" in h}
        if status != 101:
            n = int(hmap.get("content-length", "0") or 0)
            while len(self._buf) < n:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                self._buf += chunk
            sock.close()
            raise errors.error_from_response(status, self._buf[:n], hmap.get("x-request-id"))
        sock.settimeout(None)

    def _read_exact(self, n: int) -> bytes:
        while len(self._buf) < n:
            chunk = self._sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def recv(self) -> Tuple[int, bytes]:
        """The next data message (opcode, payload); (CLOSE, b"") at the end."""
        msg, op = b"", None
        while True:
            b0, b1 = self._read_exact(2)
            fin, opcode, n = b0 & 0x80, b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read_exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read_exact(8))[0]
            payload = self._read_exact(n)
            if opcode == _PING:
                self.send(_PONG, payload)
                continue
            if opcode == _PONG:
                continue
            if opcode == _CLOSE:
                try:
                    self.send(_CLOSE, payload[:2])
                except OSError:
                    pass
                return _CLOSE, payload
            if opcode != _CONT:
                op = opcode
            msg += payload
            if fin:
                return op or _BIN, msg

    def send(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 1 << 16:
            head += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack(">Q", n)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self._wlock:
            self._sock.sendall(head + mask + masked)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class Terminal:
    """An interactive terminal in a sandbox. ``read()`` returns output bytes
    (``b""`` once the command has ended: ``exit_code`` then says how);
    ``write()`` types input. ``close()`` drops the connection and leaves the
    session for ``Sandbox.reattach_terminal`` within ``grace_seconds``."""

    session_id: str
    pid: int
    grace_seconds: int
    offset: int
    exit_code: Optional[int]
    signal: Optional[str]

    def __init__(self, sandbox: Any, query: Dict[str, Any], offset: int = 0):
        self._sb = sandbox
        self.offset = offset
        self.exit_code = None
        self.signal = None
        self._ended = False
        self._closed = False
        self._dial(query)

    def _dial(self, query: Dict[str, Any]) -> None:
        c = self._sb.client
        url = c.base_url + self._sb._path("/pty") + "?" + urlencode(query, doseq=True)
        headers = {"User-Agent": "pandastack-python"}
        if c.token:
            headers["Authorization"] = "Bearer " + c.token
        self._ws = _WebSocket(url, headers, c.timeout, getattr(c._t, "_ssl", None))
        op, b = self._ws.recv()
        m = json.loads(b) if op == _TEXT else {}
        if m.get("type") != "session":
            self._ws.close()
            raise errors.PandaStackError(f"the server's first terminal message is not a session: {b!r}")
        self.session_id, self.pid = m["session_id"], m.get("pid", 0)
        self.grace_seconds = m.get("grace_seconds", 0)
        self.offset = m.get("offset", self.offset)

    def read(self) -> bytes:
        while not self._ended:
            try:
                op, b = self._ws.recv()
            except (OSError, ConnectionError):
                if self._closed:  # closed by this client (from another thread)
                    return b""
                self._dial({"session": self.session_id, "offset": self.offset})  # reattach
                continue
            if op == _BIN:
                self.offset += len(b)
                return b
            if op == _CLOSE:
                if not self._ended:
                    self._dial({"session": self.session_id, "offset": self.offset})
                continue
            m = json.loads(b)
            if m.get("type") == "exit":
                self.exit_code, self.signal, self._ended = m.get("exit_code"), m.get("signal"), True
                self._ws.close()
            elif m.get("type") == "error" and m.get("code") != "invalid_argument":
                self._ended = True
                self._ws.close()
                raise errors.make_error(m.get("code"), m.get("message", ""))
        return b""

    def write(self, data: Any) -> None:
        self._ws.send(_BIN, data.encode() if isinstance(data, str) else bytes(data))

    def _control(self, **m: Any) -> None:
        self._ws.send(_TEXT, json.dumps(m).encode())

    def resize(self, rows: int, cols: int) -> None:
        self._control(type="resize", rows=rows, cols=cols)

    def send_signal(self, signal: str) -> None:
        """To the terminal's foreground job, as ^C would (e.g. ``"INT"``)."""
        self._control(type="signal", signal=signal)

    def kill(self) -> None:
        self._control(type="kill")

    def wait(self) -> Optional[int]:
        """Reads to the end; returns the exit code."""
        while self.read():
            pass
        return self.exit_code

    def close(self) -> None:
        self._closed = True
        self._ws.close()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
