"""Plain data types returned by the SDK."""

from __future__ import annotations

import base64
import codecs
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Optional

from . import errors


def parse_time(s: Any) -> Optional[datetime]:
    """Parses an RFC 3339 time (Go writes up to 9 fractional digits)."""
    if not s or not isinstance(s, str):
        return None
    t = s.strip()
    if t.endswith("Z") or t.endswith("z"):
        t = t[:-1] + "+00:00"
    if "." in t:
        head, rest = t.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, tz = rest[:i], rest[i:]
        t = head + ("." + (frac + "000000")[:6] if frac else "") + tz
    try:
        d = datetime.fromisoformat(t)
    except ValueError:
        return None
    return d if d.tzinfo else d.replace(tzinfo=timezone.utc)


@dataclass
class FileInfo:
    """A path inside a sandbox."""
    name: str
    path: str
    size: int
    mode: int          # permission bits, e.g. 0o644
    is_dir: bool
    mod_time: Optional[datetime]
    symlink_target: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "FileInfo":
        return cls(name=d.get("name", ""), path=d.get("path", ""), size=int(d.get("size", 0)),
                   mode=int(d.get("mode", 0)), is_dir=bool(d.get("is_dir", False)),
                   mod_time=parse_time(d.get("mod_time")),
                   symlink_target=d.get("symlink_target") or None)


@dataclass
class ProcessInfo:
    """A command started in a sandbox (see Sandbox.processes)."""
    pid: int
    cmd: str
    args: List[str]
    background: bool
    running: bool
    exit_code: Optional[int]
    started_at: Optional[datetime]

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "ProcessInfo":
        return cls(pid=int(d.get("pid", 0)), cmd=d.get("cmd", ""), args=list(d.get("args") or []),
                   background=bool(d.get("background", False)), running=bool(d.get("running", False)),
                   exit_code=d.get("exit_code"), started_at=parse_time(d.get("started_at")))


@dataclass
class Template:
    """A baked guest image sandboxes are created from."""
    name: str
    id: str
    cpus: int
    memory_mib: int
    disk_mib: int
    accel: str
    built_at: Optional[datetime]
    build_ms: int
    version: int = 0
    team_id: str = ""  # the team that owns it; "" for the public catalog

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Template":
        return cls(name=d.get("name", ""), id=d.get("id", ""), cpus=int(d.get("cpus", 0)),
                   memory_mib=int(d.get("memory_mib", 0)), disk_mib=int(d.get("disk_mib", 0)),
                   accel=d.get("accel", ""), built_at=parse_time(d.get("built_at")),
                   build_ms=int(d.get("build_ms", 0)), version=int(d.get("version", 0)),
                   team_id=d.get("team_id") or "")


@dataclass
class Snapshot:
    """A saved sandbox (memory, processes, disk). ``object_key`` is where it
    is exported in the server's object storage (None until it is; what
    :meth:`PandaStack.import_snapshot` takes), ``exported_at`` when, and
    ``export_error`` why the last export failed (None when it did not)."""
    id: str
    team_id: str
    name: str
    sandbox_id: str      # the sandbox it was taken of
    template: str
    template_id: str
    host: str
    size_bytes: int
    created_at: Optional[datetime]
    object_key: Optional[str] = None
    exported_at: Optional[datetime] = None
    export_error: Optional[str] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Snapshot":
        return cls(id=d.get("id", ""), team_id=d.get("team_id", ""), name=d.get("name", ""),
                   sandbox_id=d.get("sandbox_id", ""), template=d.get("template", ""),
                   template_id=d.get("template_id", ""), host=d.get("host", ""),
                   size_bytes=int(d.get("size_bytes", 0)), created_at=parse_time(d.get("created_at")),
                   object_key=d.get("object_key") or None, exported_at=parse_time(d.get("exported_at")),
                   export_error=d.get("export_error") or None)


@dataclass
class CreatedKey:
    """A new API key; ``key`` is the secret, shown only once."""
    id: str
    key: str
    team: str
    team_id: str
    name: str
    prefix: str
    admin: bool


@dataclass
class Key:
    """An API key as listed: never its secret. ``revoked_at`` is None while
    the key works."""
    id: str
    team: str
    team_id: str
    name: str
    prefix: str
    admin: bool
    created_at: Optional[datetime]
    revoked_at: Optional[datetime] = None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Key":
        return cls(id=d.get("id", ""), team=d.get("team", ""), team_id=d.get("team_id", ""),
                   name=d.get("name", ""), prefix=d.get("prefix", ""), admin=bool(d.get("admin")),
                   created_at=parse_time(d.get("created_at")), revoked_at=parse_time(d.get("revoked_at")))


@dataclass
class ExecResult:
    """How a command ended and what it printed."""
    pid: int = 0
    stdout_bytes: bytes = b""
    stderr_bytes: bytes = b""
    exit_code: int = 0
    signal: str = ""          # the signal that ended it, if any (e.g. SIGKILL)
    timed_out: bool = False   # killed by timeout_seconds (exit_code is then 137)
    duration_ms: float = 0.0

    @property
    def stdout(self) -> str:
        """stdout decoded as UTF-8 (invalid bytes replaced)."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """stderr decoded as UTF-8 (invalid bytes replaced)."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def ok(self) -> bool:
        """True if the command exited 0 and did not time out."""
        return self.exit_code == 0 and not self.timed_out

    def __repr__(self) -> str:
        return (f"ExecResult(pid={self.pid}, exit_code={self.exit_code}, signal={self.signal!r}, "
                f"timed_out={self.timed_out}, stdout={_short(self.stdout)!r}, "
                f"stderr={_short(self.stderr)!r}, duration_ms={self.duration_ms})")


def _short(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."


class _Sink:
    """Collects one output stream and feeds its callbacks: str chunks
    (incrementally decoded, so a UTF-8 character split across chunks is
    never mangled) and/or raw bytes."""

    def __init__(self, on_str: Optional[Callable[[str], Any]],
                 on_bytes: Optional[Callable[[bytes], Any]], keep: bool):
        self.on_str = on_str
        self.on_bytes = on_bytes
        self.keep = keep
        self.buf = bytearray()
        self.dec = codecs.getincrementaldecoder("utf-8")("replace") if on_str else None

    def feed(self, data: bytes) -> None:
        if self.keep:
            self.buf += data
        if self.on_bytes is not None:
            self.on_bytes(data)
        if self.dec is not None:
            s = self.dec.decode(data)
            if s:
                self.on_str(s)

    def finish(self) -> None:
        if self.dec is not None:
            s = self.dec.decode(b"", final=True)
            if s:
                self.on_str(s)


def read_exec_stream(lines: Iterable[bytes], request_id: Optional[str] = None, *,
                     on_stdout: Optional[Callable[[str], Any]] = None,
                     on_stderr: Optional[Callable[[str], Any]] = None,
                     on_stdout_bytes: Optional[Callable[[bytes], Any]] = None,
                     on_stderr_bytes: Optional[Callable[[bytes], Any]] = None,
                     on_start: Optional[Callable[[int], Any]] = None,
                     discard_output: bool = False) -> ExecResult:
    """Consumes an NDJSON command stream up to its exit or error line."""
    res = ExecResult()
    out = _Sink(on_stdout, on_stdout_bytes, not discard_output)
    err = _Sink(on_stderr, on_stderr_bytes, not discard_output)

    def done() -> None:
        out.finish()
        err.finish()
        res.stdout_bytes, res.stderr_bytes = bytes(out.buf), bytes(err.buf)

    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError as e:
            raise errors.APIConnectionError(f"invalid line in the command stream: {line[:200]!r}",
                                            request_id=request_id) from e
        typ = ev.get("type") if isinstance(ev, dict) else None
        if typ == "start":
            res.pid = int(ev.get("pid") or 0)
            if on_start is not None:
                on_start(res.pid)
        elif typ == "stdout":
            out.feed(base64.b64decode(ev.get("data") or ""))
        elif typ == "stderr":
            err.feed(base64.b64decode(ev.get("data") or ""))
        elif typ == "exit":
            r = ev.get("result") or {}
            res.exit_code = int(r.get("exit_code", 0))
            res.signal = r.get("signal") or ""
            res.timed_out = bool(r.get("timed_out", False))
            res.duration_ms = float(r.get("duration_ms", 0.0))
            done()
            return res
        elif typ == "error":
            e = ev.get("error") or {}
            done()
            raise errors.make_error(e.get("code") or "internal", e.get("message") or "unknown error",
                                    None, request_id)
        # unknown line types are ignored (forward compatibility)
    done()
    raise errors.APIConnectionError("command stream ended before the command did",
                                    request_id=request_id)
