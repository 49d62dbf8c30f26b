"""PandaStack: run untrusted code in QEMU microVM sandboxes.

    from pandastack import Sandbox
    sbx = Sandbox.create(template="base")      # PANDASTACK_API_KEY, PANDASTACK_BASE_URL
    print(sbx.exec("echo hello").stdout)
    sbx.kill()

Standard library only. ``pandastack.aio`` has the asyncio variant.
"""

from ._code import Execution, ExecutionError, Logs, Result
from ._models import CreatedKey, ExecResult, FileInfo, Key, ProcessInfo, Snapshot, Template
from ._version import __version__
from .client import (DEFAULT_BASE_URL, BackgroundProcess, Filesystem, PandaStack, Sandbox,
                     Sandboxes, Volumes)
from .errors import (APIConnectionError, AuthenticationError, ConflictError, GoneError,
                     InsufficientStorageError, InternalServerError, InvalidArgumentError, MethodNotAllowedError,
                     NotFoundError, OutputTooLargeError, PandaStackError, PayloadTooLargeError,
                     PermissionDeniedError, QuotaExceededError, RateLimitError,
                     RequestTimeoutError, UnavailableError)

__all__ = [
    "__version__", "DEFAULT_BASE_URL", "PandaStack", "Sandboxes", "Sandbox", "Volumes", "Filesystem",
    "BackgroundProcess", "ExecResult", "Execution", "ExecutionError", "Logs", "Result", "FileInfo", "ProcessInfo", "Template", "Snapshot", "CreatedKey", "Key",
    "PandaStackError", "InvalidArgumentError", "AuthenticationError", "PermissionDeniedError",
    "NotFoundError", "MethodNotAllowedError", "ConflictError", "GoneError",
    "PayloadTooLargeError", "OutputTooLargeError", "RateLimitError", "QuotaExceededError",
    "InternalServerError", "InsufficientStorageError", "UnavailableError", "APIConnectionError", "RequestTimeoutError",
]
