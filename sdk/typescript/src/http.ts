// The HTTP layer: one place that builds requests (auth, user agent, JSON or
// raw bodies) and turns error answers into typed errors.

import { APIConnectionError, errorFromBody, PandaStackError } from "./errors.js";
import { describe, isAbort } from "./ndjson.js";
import { VERSION } from "./version.js";

export const NDJSON = "application/x-ndjson";

export type Query = Record<string, string | number | boolean | undefined>;

export interface HttpRequest {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** Under the base URL, e.g. /v1/sandboxes. */
  path: string;
  query?: Query | URLSearchParams;
  /** JSON-encoded. */
  json?: unknown;
  /** Sent as-is (application/octet-stream). */
  body?: Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;
  /** Default application/json. */
  accept?: string;
  /** Content type of `body` (default application/octet-stream). */
  contentType?: string;
  signal?: AbortSignal | undefined;
}

type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface HttpConfig {
  baseUrl: string;
  apiKey: string | undefined;
  fetch?: FetchLike | undefined;
  headers?: Record<string, string> | undefined;
}

export class HttpClient {
  readonly baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #fetch: FetchLike;
  readonly #headers: Record<string, string>;

  constructor(cfg: HttpConfig) {
    this.baseUrl = cfg.baseUrl.replace(/\/+$/, "");
    this.#apiKey = cfg.apiKey;
    const f = cfg.fetch ?? (globalThis.fetch as FetchLike | undefined);
    if (typeof f !== "function") {
      throw new TypeError("pandastack: no global fetch in this runtime; pass `fetch` in the client options");
    }
    this.#fetch = cfg.fetch ? f : (input, init) => globalThis.fetch(input, init);
    this.#headers = { ...(cfg.headers ?? {}) };
  }

  get hasApiKey(): boolean {
    return !!this.#apiKey;
  }

  url(path: string, query?: Query | URLSearchParams): string {
    let u = this.baseUrl + path;
    let qs = "";
    if (query instanceof URLSearchParams) qs = query.toString();
    else if (query) {
      const p = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) p.append(k, String(v));
      qs = p.toString();
    }
    if (qs) u += "?" + qs;
    return u;
  }

  /** The headers of a WebSocket upgrade (auth, user agent, the client's own). */
  upgradeHeaders(): Record<string, string> {
    const headers: Record<string, string> = { "User-Agent": `pandastack-typescript/${VERSION}`, ...this.#headers };
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    return headers;
  }

  /** Performs a request; resolves with the response if 2xx, otherwise rejects with the typed error. */
  async send(r: HttpRequest): Promise<Response> {
    const headers: Record<string, string> = {
      Accept: r.accept ?? "application/json",
      "User-Agent": `pandastack-typescript/${VERSION}`,
      ...this.#headers,
    };
    if (this.#apiKey) headers["Authorization"] = `Bearer ${this.#apiKey}`;
    const init: RequestInit & { duplex?: "half" } = { method: r.method, headers };
    if (r.signal) init.signal = r.signal;
    if (r.json !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(r.json);
    } else if (r.body !== undefined) {
      headers["Content-Type"] = r.contentType ?? "application/octet-stream";
      init.body = r.body as BodyInit;
      if (typeof (r.body as { getReader?: unknown }).getReader === "function") init.duplex = "half";
    }
    let resp: Response;
    try {
      resp = await this.#fetch(this.url(r.path, r.query), init);
    } catch (cause) {
      if (isAbort(cause)) throw cause;
      throw new APIConnectionError({
        status: 0,
        code: "connection_error",
        message: `${r.method} ${this.baseUrl}${r.path}: ${describe(cause)}`,
        cause,
      });
    }
    if (resp.ok) return resp;
    let text = "";
    try {
      text = await resp.text();
    } catch {
      // the body broke: report the status alone
    }
    throw errorFromBody(resp.status, text, resp.headers.get("x-request-id"), resp.headers.get("retry-after"));
  }

  /** Performs a request and parses a JSON answer (undefined for an empty body, e.g. 204). */
  async json<T>(r: HttpRequest): Promise<T> {
    const resp = await this.send(r);
    const rid = resp.headers.get("x-request-id") ?? undefined;
    let text: string;
    try {
      text = await resp.text();
    } catch (cause) {
      if (isAbort(cause)) throw cause;
      throw new APIConnectionError({ status: 0, code: "connection_error", message: `${r.method} ${r.path}: ${describe(cause)}`, requestId: rid, cause });
    }
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new PandaStackError({
        status: resp.status,
        code: "invalid_response",
        message: `${r.method} ${r.path}: answer is not JSON: ${text.slice(0, 100)}`,
        requestId: rid,
        cause,
      });
    }
  }
}
