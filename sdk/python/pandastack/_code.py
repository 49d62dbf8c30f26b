"""run_code: results of the live interpreter of the code-interpreter template."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional

from . import errors


@dataclass
class Result:
    """A rich output of a run: the last expression's value (``is_main_result``)
    or a matplotlib figure. ``png`` is base64, as Jupyter sends it."""
    text: Optional[str] = None
    png: Optional[str] = None
    html: Optional[str] = None
    is_main_result: bool = False

    @property
    def png_bytes(self) -> Optional[bytes]:
        """The PNG decoded, or None."""
        return base64.b64decode(self.png) if self.png else None

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Result":
        return cls(text=d.get("text"), png=d.get("png"), html=d.get("html"),
                   is_main_result=bool(d.get("is_main_result", False)))

    def __repr__(self) -> str:
        kinds = [k for k in ("text", "png", "html") if getattr(self, k)]
        return f"Result({', '.join(kinds)}: {(self.text or '')[:80]!r})"


@dataclass
class ExecutionError:
    """The exception the code raised (TimeoutError when its timeout interrupted it)."""
    name: str
    value: str
    traceback: str  # the formatted traceback, as one string

    def __str__(self) -> str:
        return f"{self.name}: {self.value}"


@dataclass
class Logs:
    stdout: List[str] = field(default_factory=list)
    stderr: List[str] = field(default_factory=list)


@dataclass
class Execution:
    """What a run_code call produced."""
    results: List[Result] = field(default_factory=list)
    logs: Logs = field(default_factory=Logs)
    error: Optional[ExecutionError] = None
    execution_count: int = 0
    timed_out: bool = False

    @property
    def text(self) -> Optional[str]:
        """The text of the main result (the last expression's value), if any."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None


def read_code_stream(lines: Iterable[bytes], request_id: Optional[str],
                     on_stdout: Optional[Callable[[str], Any]] = None,
                     on_stderr: Optional[Callable[[str], Any]] = None,
                     on_result: Optional[Callable[[Result], Any]] = None) -> Execution:
    """Consumes a run_code NDJSON stream up to its end (or abort) line."""
    ex = Execution()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            raise errors.APIConnectionError(f"invalid line in the code stream: {line[:200]!r}",
                                            request_id=request_id)
        typ = ev.get("type")
        if typ == "stdout":
            ex.logs.stdout.append(ev.get("text", ""))
            if on_stdout:
                on_stdout(ev.get("text", ""))
        elif typ == "stderr":
            ex.logs.stderr.append(ev.get("text", ""))
            if on_stderr:
                on_stderr(ev.get("text", ""))
        elif typ == "result":
            r = Result.from_dict(ev.get("result") or {})
            ex.results.append(r)
            if on_result:
                on_result(r)
        elif typ == "error":
            e = ev.get("error") or {}
            ex.error = ExecutionError(e.get("name", ""), e.get("value", ""), "".join(e.get("traceback") or []))
        elif typ == "end":
            ex.execution_count = int(ev.get("execution_count", 0))
            ex.timed_out = bool(ev.get("timed_out", False))
            return ex
        elif typ == "abort":
            e = ev.get("abort") or {}
            raise errors.make_error(e.get("code") or "internal", e.get("message") or "unknown error",
                                    None, request_id)
    raise errors.APIConnectionError("code stream ended before the run did", request_id=request_id)
