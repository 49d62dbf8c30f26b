// Directory watches: GET /v1/sandboxes/{id}/files/watch, NDJSON.

import { makeError, type ErrorCode } from "./errors.js";
import type { HttpClient } from "./http.js";
import { readNDJSON } from "./ndjson.js";

/** One change under a watched directory; `path` (and `from`, for a rename) is relative to it. */
export interface FileEvent {
  type: "create" | "write" | "remove" | "rename" | "chmod" | "overflow";
  path?: string;
  from?: string;
  isDir?: boolean;
}

export interface WatchOptions {
  recursive?: boolean;
  /** Ends the watch (without error) after this long. */
  timeoutSeconds?: number;
}

/** A running watch: `stop()` ends it; `done` settles when it ends (rejects if it failed). */
export interface WatchHandle {
  stop(): void;
  done: Promise<void>;
}

interface WireLine {
  type: string;
  path?: string;
  from?: string;
  is_dir?: boolean;
  error?: { code: string; message: string };
}

/** @internal Use `sandbox.filesystem.watchDir`. */
export async function watchDir(
  http: HttpClient,
  base: string,
  path: string,
  onEvent: (e: FileEvent) => void,
  opts: WatchOptions = {},
): Promise<WatchHandle> {
  const ac = new AbortController();
  const query: Record<string, string> = { path };
  if (opts.recursive) query["recursive"] = "true";
  if (opts.timeoutSeconds) query["timeout_seconds"] = String(opts.timeoutSeconds);
  const resp = await http.send({ method: "GET", path: base + "/files/watch", query, accept: "application/x-ndjson", signal: ac.signal });
  const lines = readNDJSON<WireLine>(resp.body!, resp.headers.get("X-Request-Id") ?? undefined);
  const first = await lines.next();
  if (first.done || first.value.type !== "start") {
    ac.abort();
    throw makeError({ status: 0, code: "invalid_response" as ErrorCode, message: `watch ${path}: the stream did not start` });
  }
  const done = (async () => {
    try {
      for await (const l of lines) {
        if (l.type === "error") {
          throw makeError({ status: 0, code: (l.error?.code ?? "internal") as ErrorCode, message: l.error?.message ?? "" });
        }
        const ev: FileEvent = { type: l.type as FileEvent["type"] };
        if (l.path !== undefined) ev.path = l.path;
        if (l.from !== undefined) ev.from = l.from;
        if (l.is_dir) ev.isDir = true;
        onEvent(ev);
      }
    } catch (e) {
      if (!ac.signal.aborted) throw e;
    }
  })();
  done.catch(() => {});
  return { stop: () => ac.abort(), done };
}
