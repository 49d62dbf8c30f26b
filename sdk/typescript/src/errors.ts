// Typed errors. Every error the server answers becomes a PandaStackError (or
// one of its subclasses, chosen by the error code first and the HTTP status
// second), so callers can write `if (err instanceof GoneError)`.

/** The error codes the server uses (see api/openapi.yaml). */
export type ErrorCode =
  | "invalid_argument"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "gone"
  | "too_large"
  | "output_too_large"
  | "quota_exceeded"
  | "rate_limited"
  | "timeout"
  | "unavailable"
  | "internal"
  | "insufficient_storage"
  // Client-side codes (never sent by the server):
  | "connection_error"
  | "invalid_response"
  | (string & {});

export interface PandaStackErrorInit {
  /** HTTP status; 0 for an error reported inside a stream or by the network. */
  status: number;
  code: ErrorCode;
  message: string;
  /** The X-Request-Id of the request, for support. */
  requestId?: string | undefined;
  cause?: unknown;
}

/** An error answered by the PandaStack server (or met talking to it). */
export class PandaStackError extends Error {
  /** HTTP status; 0 for an error reported inside a stream (after the response started) or by the network. */
  readonly status: number;
  /** Machine-readable code, e.g. "not_found". */
  readonly code: ErrorCode;
  /** The X-Request-Id of the request, if known. */
  readonly requestId: string | undefined;

  constructor(init: PandaStackErrorInit) {
    super(init.message, init.cause !== undefined ? { cause: init.cause } : undefined);
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
  }
}

/** 400 invalid_argument: the request was malformed or a value was out of range. */
export class InvalidArgumentError extends PandaStackError {}
/** 401 unauthorized: the API key is missing or invalid. */
export class AuthenticationError extends PandaStackError {}
/** 403 forbidden: the key may not do this (e.g. the route needs an admin key). */
export class PermissionDeniedError extends PandaStackError {}
/** 404 not_found: no such thing (another team's sandbox also answers 404), or a route the server does not serve. */
export class NotFoundError extends PandaStackError {}
/** 405 method_not_allowed: the server knows the path but not this method (e.g. an older server). */
export class MethodNotAllowedError extends PandaStackError {}
/** 409 conflict, e.g. removing a non-empty directory without `recursive`. */
export class ConflictError extends PandaStackError {}
/** 410 gone: the sandbox has ended (killed, expired or failed). */
export class GoneError extends PandaStackError {}
/** 413 too_large: the request (body, stdin, ...) is too large. */
export class PayloadTooLargeError extends PandaStackError {}
/** 422 output_too_large: a buffered command printed more than the server keeps. */
export class OutputTooLargeError extends PandaStackError {}
/**
 * 429 rate_limited: the API key sent more than its team's requests_per_second;
 * wait `retryAfterSeconds`. Also the base class of QuotaExceededError (both
 * are HTTP 429), so `instanceof RateLimitError` catches either.
 */
export class RateLimitError extends PandaStackError {
  /** Seconds to wait, from a Retry-After header, if the server sent one. */
  retryAfterSeconds: number | undefined;
  constructor(init: PandaStackErrorInit & { retryAfterSeconds?: number | undefined }) {
    super(init);
    this.retryAfterSeconds = init.retryAfterSeconds;
  }
}
/**
 * 429 quota_exceeded: the team is at one of its quotas; the message names it
 * and the numbers ("max_sandboxes is 20; team has 20 live sandboxes and this
 * needs 1 more"). Waiting does not help: free something, or ask an admin.
 */
export class QuotaExceededError extends RateLimitError {}
/** 500 internal: the server failed. */
export class InternalServerError extends PandaStackError {}
/** 507 insufficient_storage: the host's disk cannot hold it (a volume). */
export class InsufficientStorageError extends PandaStackError {}
/** 503 unavailable: the server cannot serve this now (e.g. no capacity, template not built). */
export class UnavailableError extends PandaStackError {}
/** 504 timeout: the server timed out. (A command's own timeout is not an error: see ExecResult.timedOut.) */
export class RequestTimeoutError extends PandaStackError {}
/**
 * The server could not be reached, the connection broke, or a stream ended
 * before its final line (status 0, code "connection_error").
 */
export class APIConnectionError extends PandaStackError {}

type ErrorClass = new (init: PandaStackErrorInit) => PandaStackError;

const BY_CODE: Record<string, ErrorClass> = {
  invalid_argument: InvalidArgumentError,
  unauthorized: AuthenticationError,
  forbidden: PermissionDeniedError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  gone: GoneError,
  too_large: PayloadTooLargeError,
  output_too_large: OutputTooLargeError,
  quota_exceeded: QuotaExceededError,
  rate_limited: RateLimitError,
  timeout: RequestTimeoutError,
  unavailable: UnavailableError,
  internal: InternalServerError,
  insufficient_storage: InsufficientStorageError,
  connection_error: APIConnectionError,
};

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: "invalid_argument",
  401: "unauthorized",
  403: "forbidden",
  404: "not_found",
  405: "method_not_allowed",
  409: "conflict",
  410: "gone",
  413: "too_large",
  422: "output_too_large",
  429: "rate_limited",
  500: "internal",
  502: "unavailable",
  503: "unavailable",
  504: "timeout",
  507: "insufficient_storage",
};

/** The code a status implies, for error answers that are not the API's JSON (e.g. from a proxy). */
export function codeForStatus(status: number): ErrorCode {
  return CODE_BY_STATUS[status] ?? "internal";
}

/**
 * Builds the right PandaStackError subclass: by the code if it is known,
 * otherwise by the HTTP status, otherwise PandaStackError itself.
 */
export function makeError(init: PandaStackErrorInit & { retryAfterSeconds?: number | undefined }): PandaStackError {
  const cls = BY_CODE[init.code] ?? BY_CODE[CODE_BY_STATUS[init.status] ?? ""] ?? PandaStackError;
  return new cls(init);
}

/**
 * Turns an error answer (status and body text) into a PandaStackError. The
 * body is expected to be `{"error":{"code","message"}}`; anything else is
 * summarized with the status.
 */
export function errorFromBody(
  status: number,
  bodyText: string,
  requestId?: string | null,
  retryAfter?: string | null,
): PandaStackError {
  let retryAfterSeconds: number | undefined;
  if (retryAfter) {
    const n = Number(retryAfter);
    if (Number.isFinite(n)) retryAfterSeconds = n;
    else {
      const t = Date.parse(retryAfter);
      if (!Number.isNaN(t)) retryAfterSeconds = Math.max(0, Math.round((t - Date.now()) / 1000));
    }
  }
  const rid = requestId ?? undefined;
  try {
    const wire = JSON.parse(bodyText) as { error?: { code?: unknown; message?: unknown } };
    const code = wire?.error?.code;
    if (typeof code === "string" && code !== "") {
      const message = typeof wire.error!.message === "string" ? wire.error!.message : code;
      return makeError({ status, code, message, requestId: rid, retryAfterSeconds });
    }
  } catch {
    // not JSON: fall through
  }
  let text = bodyText.trim();
  if (text.length > 200) text = text.slice(0, 200) + "...";
  if (text === "") text = `status ${status}`;
  return makeError({ status, code: codeForStatus(status), message: `HTTP ${status}: ${text}`, requestId: rid, retryAfterSeconds });
}
