// NDJSON reading: splits a byte stream into lines (at the byte level, so a
// line or a UTF-8 character split across chunks is put back together) and
// parses each line as JSON.

import { APIConnectionError, PandaStackError } from "./errors.js";

function concat(parts: Uint8Array[], total: number): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/**
 * Yields each non-empty line of `body` parsed as JSON. A final line without
 * a newline is parsed too. Stopping the iteration early cancels the stream
 * (closing the connection). Network failures become APIConnectionError.
 */
export async function* readNDJSON<T = unknown>(
  body: ReadableStream<Uint8Array>,
  requestId?: string,
): AsyncGenerator<T, void, undefined> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let pending: Uint8Array[] = [];
  let pendingLen = 0;
  let finished = false;
  const parse = (bytes: Uint8Array): T | undefined => {
    const text = decoder.decode(bytes).trim();
    if (text === "") return undefined;
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new PandaStackError({
        status: 0,
        code: "invalid_response",
        message: `invalid NDJSON line from server: ${text.slice(0, 100)}`,
        requestId,
        cause,
      });
    }
  };
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (cause) {
        if (isAbort(cause)) throw cause;
        throw new APIConnectionError({
          status: 0,
          code: "connection_error",
          message: `stream broke: ${describe(cause)}`,
          requestId,
          cause,
        });
      }
      if (chunk.done) break;
      const value = chunk.value;
      let start = 0;
      for (let nl = value.indexOf(10); nl !== -1; nl = value.indexOf(10, start)) {
        let line = value.subarray(start, nl);
        if (pendingLen > 0) {
          pending.push(line);
          line = concat(pending, pendingLen + line.length);
          pending = [];
          pendingLen = 0;
        }
        start = nl + 1;
        const v = parse(line);
        if (v !== undefined) yield v;
      }
      if (start < value.length) {
        // Copy: the runtime may reuse the chunk's buffer.
        const rest = value.slice(start);
        pending.push(rest);
        pendingLen += rest.length;
      }
    }
    finished = true;
    if (pendingLen > 0) {
      let v: T | undefined;
      try {
        v = parse(concat(pending, pendingLen));
      } catch {
        // A cut-off last line: the caller notices the missing final event.
        v = undefined;
      }
      if (v !== undefined) yield v;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

export function isAbort(err: unknown): boolean {
  return (
    typeof err === "object" &&
    err !== null &&
    ((err as { name?: unknown }).name === "AbortError" || (err as { name?: unknown }).name === "TimeoutError")
  );
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error && cause.message ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
