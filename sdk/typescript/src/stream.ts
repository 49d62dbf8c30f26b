// Consuming a command stream (exec with Accept: application/x-ndjson, or a
// process attach) up to its exit or error line.

import { decodeBase64 } from "./base64.js";
import { APIConnectionError, makeError } from "./errors.js";
import { readNDJSON } from "./ndjson.js";
import type { ExecResult, OutputCallback, WireExecEvent } from "./types.js";

export interface StreamHandlers {
  onStdout?: OutputCallback | undefined;
  onStderr?: OutputCallback | undefined;
  discardOutput?: boolean | undefined;
}

class Collector {
  parts: Uint8Array[] = [];
  length = 0;
  readonly decoder = new TextDecoder();
  constructor(
    readonly cb: OutputCallback | undefined,
    readonly keep: boolean,
  ) {}
  add(bytes: Uint8Array): void {
    if (this.keep) {
      this.parts.push(bytes);
      this.length += bytes.length;
    }
    if (this.cb) this.cb(this.decoder.decode(bytes, { stream: true }), bytes);
  }
  flush(): void {
    if (this.cb) {
      const rest = this.decoder.decode();
      if (rest !== "") this.cb(rest, new Uint8Array(0));
    }
  }
  bytes(): Uint8Array {
    if (this.parts.length === 1) return this.parts[0]!;
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const p of this.parts) {
      out.set(p, o);
      o += p.length;
    }
    return out;
  }
}

/** Reads a command stream to its end; rejects with the stream's error line or an APIConnectionError if cut off. */
export async function readExecStream(resp: Response, h: StreamHandlers): Promise<ExecResult> {
  const requestId = resp.headers.get("x-request-id") ?? undefined;
  const keep = !h.discardOutput;
  const out = new Collector(h.onStdout, keep);
  const err = new Collector(h.onStderr, keep);
  let pid = 0;
  if (!resp.body) {
    throw new APIConnectionError({ status: 0, code: "connection_error", message: "command stream had no body", requestId });
  }
  for await (const ev of readNDJSON<WireExecEvent>(resp.body, requestId)) {
    switch (ev.type) {
      case "start":
        pid = ev.pid;
        break;
      case "stdout":
        out.add(decodeBase64(ev.data ?? ""));
        break;
      case "stderr":
        err.add(decodeBase64(ev.data ?? ""));
        break;
      case "exit": {
        out.flush();
        err.flush();
        const stdoutBytes = out.bytes();
        const stderrBytes = err.bytes();
        const dec = new TextDecoder();
        const r = ev.result ?? { exit_code: 0, timed_out: false, duration_ms: 0 };
        return {
          pid,
          stdout: dec.decode(stdoutBytes),
          stderr: dec.decode(stderrBytes),
          stdoutBytes,
          stderrBytes,
          exitCode: r.exit_code,
          signal: r.signal ?? "",
          timedOut: r.timed_out,
          durationMs: r.duration_ms,
        };
      }
      case "error":
        throw makeError({
          status: 0,
          code: ev.error?.code || "internal",
          message: ev.error?.message || "unknown error",
          requestId,
        });
    }
  }
  throw new APIConnectionError({
    status: 0,
    code: "connection_error",
    message: "command stream ended before the command did",
    requestId,
  });
}
