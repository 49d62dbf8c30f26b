"""Typed errors raised by the PandaStack SDK.

Every error answered by the server is a :class:`PandaStackError` (or a
subclass picked from the error *code* first, the HTTP *status* second), with
``.status`` (the HTTP status; ``None`` for an error reported inside a stream
or found on the client side), ``.code`` (e.g. ``"not_found"``), ``.message``
and ``.request_id`` (the ``X-Request-Id`` of the request, for support).
"""

from __future__ import annotations

import json
from typing import Optional


class PandaStackError(Exception):
    """Base class of every error raised by the SDK."""

    default_code = "internal"

    def __init__(self, message: str = "", *, status: Optional[int] = None,
                 code: Optional[str] = None, request_id: Optional[str] = None):
        self.message = message
        self.status = status
        self.code = code or self.default_code
        self.request_id = request_id
        super().__init__(message)

    def __str__(self) -> str:
        s = f"pandastack: {self.code}: {self.message}"
        if self.status:
            s += f" (HTTP {self.status}"
            if self.request_id:
                s += f", request {self.request_id}"
            s += ")"
        return s

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, message={self.message!r}, "
                f"status={self.status!r}, request_id={self.request_id!r})")

    def __reduce__(self):  # keep pickling (e.g. across processes) working
        return (_rebuild, (type(self), self.message, self.status, self.code, self.request_id))


def _rebuild(cls, message, status, code, request_id):
    return cls(message, status=status, code=code, request_id=request_id)


class InvalidArgumentError(PandaStackError):
    """400 invalid_argument: the request was invalid."""
    default_code = "invalid_argument"


class AuthenticationError(PandaStackError):
    """401 unauthorized: the API key is missing or invalid."""
    default_code = "unauthorized"


class PermissionDeniedError(PandaStackError):
    """403 forbidden: the key may not do this (e.g. it needs an admin key)."""
    default_code = "forbidden"


class NotFoundError(PandaStackError):
    """404 not_found: no such thing (or it belongs to another team)."""
    default_code = "not_found"


class MethodNotAllowedError(PandaStackError):
    """405 method_not_allowed."""
    default_code = "method_not_allowed"


class ConflictError(PandaStackError):
    """409 conflict, e.g. removing a non-empty directory without recursive."""
    default_code = "conflict"


class GoneError(PandaStackError):
    """410 gone: the sandbox has ended (killed, expired or failed)."""
    default_code = "gone"


class PayloadTooLargeError(PandaStackError):
    """413 too_large: the request body is too large."""
    default_code = "too_large"


class OutputTooLargeError(PandaStackError):
    """422 output_too_large: buffered output exceeded the server's limit."""
    default_code = "output_too_large"


class RateLimitError(PandaStackError):
    """429 rate_limited: the API key sent more than its team's
    ``requests_per_second``. ``retry_after`` is the seconds the server asked
    to wait (its ``Retry-After`` header), or None.

    Also the base class of QuotaExceededError (both are HTTP 429)."""
    default_code = "rate_limited"

    def __init__(self, message: str = "", *, status: Optional[int] = None,
                 code: Optional[str] = None, request_id: Optional[str] = None,
                 retry_after: Optional[float] = None):
        super().__init__(message, status=status, code=code, request_id=request_id)
        self.retry_after = retry_after

    def __reduce__(self):
        return (_rebuild_rate, (type(self), self.message, self.status, self.code, self.request_id,
                                self.retry_after))


def _rebuild_rate(cls, message, status, code, request_id, retry_after):
    return cls(message, status=status, code=code, request_id=request_id, retry_after=retry_after)


class QuotaExceededError(RateLimitError):
    """429 quota_exceeded: the team is at one of its quotas; the message
    names it and the numbers ("max_sandboxes is 20; team has 20 live
    sandboxes and this needs 1 more"). Waiting does not help: free
    something, or ask an admin for a higher quota."""
    default_code = "quota_exceeded"


class InternalServerError(PandaStackError):
    """500 internal."""
    default_code = "internal"


class InsufficientStorageError(PandaStackError):
    """507 insufficient_storage: the host's disk cannot hold it (a volume)."""
    default_code = "insufficient_storage"


class UnavailableError(PandaStackError):
    """503 unavailable (also 502): the server cannot serve the request now."""
    default_code = "unavailable"


class APIConnectionError(UnavailableError):
    """The server could not be reached, or a response/stream was cut off."""
    default_code = "connection_error"


class RequestTimeoutError(PandaStackError, TimeoutError):
    """504 timeout, or the client gave up waiting (socket timeout).

    Also an instance of the built-in TimeoutError.
    """
    default_code = "timeout"

    def __str__(self) -> str:  # TimeoutError (OSError) has its own __str__
        return PandaStackError.__str__(self)


_BY_CODE = {
    "invalid_argument": InvalidArgumentError,
    "unauthorized": AuthenticationError,
    "forbidden": PermissionDeniedError,
    "not_found": NotFoundError,
    "method_not_allowed": MethodNotAllowedError,
    "conflict": ConflictError,
    "gone": GoneError,
    "too_large": PayloadTooLargeError,
    "output_too_large": OutputTooLargeError,
    "quota_exceeded": QuotaExceededError,
    "rate_limited": RateLimitError,
    "timeout": RequestTimeoutError,
    "unavailable": UnavailableError,
    "internal": InternalServerError,
    "insufficient_storage": InsufficientStorageError,
}

_BY_STATUS = {
    400: InvalidArgumentError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: ConflictError,
    410: GoneError,
    413: PayloadTooLargeError,
    422: OutputTooLargeError,
    429: RateLimitError,
    500: InternalServerError,
    502: UnavailableError,
    503: UnavailableError,
    504: RequestTimeoutError,
    507: InsufficientStorageError,
}


def error_class(code: Optional[str], status: Optional[int]) -> type:
    """The exception class for an error code (first) or HTTP status (second)."""
    cls = _BY_CODE.get(code or "")
    if cls is None:
        cls = _BY_STATUS.get(status or 0)
    if cls is None:
        cls = InternalServerError if (status or 0) >= 500 else PandaStackError
    return cls


def make_error(code: Optional[str], message: str, status: Optional[int] = None,
               request_id: Optional[str] = None, retry_after: Optional[float] = None) -> PandaStackError:
    """Build the typed error for a code/status pair."""
    cls = error_class(code, status)
    if issubclass(cls, RateLimitError):
        return cls(message, status=status, code=code or cls.default_code, request_id=request_id,
                   retry_after=retry_after)
    return cls(message, status=status, code=code or cls.default_code, request_id=request_id)


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(int(value)))
    except ValueError:
        pass
    try:
        from email.utils import parsedate_to_datetime
        import time as _time
        return max(0.0, round(parsedate_to_datetime(value).timestamp() - _time.time()))
    except (TypeError, ValueError, IndexError):
        return None


def error_from_response(status: int, body: bytes, request_id: Optional[str],
                        reason: str = "", retry_after: Optional[float] = None) -> PandaStackError:
    """Turn an error answer into a typed error. Bodies that are not the API's
    JSON error (e.g. from a proxy) are described by their status."""
    try:
        wire = json.loads(body.decode("utf-8"))
        err = wire.get("error") if isinstance(wire, dict) else None
        if isinstance(err, dict) and err.get("code"):
            return make_error(str(err["code"]), str(err.get("message", "")), status, request_id,
                              retry_after)
    except (ValueError, UnicodeDecodeError):
        pass
    text = body.decode("utf-8", "replace").strip()
    if len(text) > 200:
        text = text[:200] + "..."
    text = f"HTTP {status}: {text or reason or 'error'}"
    cls = error_class(None, status)
    return make_error(cls.default_code if cls is not PandaStackError else "unknown", text, status,
                      request_id, retry_after)


__all__ = [
    "PandaStackError", "InvalidArgumentError", "AuthenticationError", "PermissionDeniedError",
    "NotFoundError", "MethodNotAllowedError", "ConflictError", "GoneError",
    "PayloadTooLargeError", "OutputTooLargeError", "RateLimitError", "QuotaExceededError",
    "InternalServerError", "UnavailableError", "APIConnectionError", "RequestTimeoutError",
    "error_class", "make_error", "error_from_response", "parse_retry_after",
]
