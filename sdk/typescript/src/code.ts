// run_code: the live interpreter of the code-interpreter template.

import { APIConnectionError, makeError } from "./errors.js";
import { readNDJSON } from "./ndjson.js";

/** Options of Sandbox.runCode. */
export interface RunCodeOptions {
  /** "python" (the default). */
  language?: string;
  /** The namespace to run in; default "default". */
  contextId?: string;
  /** Interrupt the run after this long (it ends with a TimeoutError); 0 or unset: no limit. */
  timeoutSeconds?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (r: CodeResult) => void;
  signal?: AbortSignal;
}

/** A rich output: the last expression's value (isMainResult) or a matplotlib figure. */
export interface CodeResult {
  text?: string;
  /** PNG, base64. */
  png?: string;
  html?: string;
  isMainResult: boolean;
}

/** The exception the code raised (TimeoutError when its timeout interrupted it). */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** What a run produced. */
export interface Execution {
  /** The main result's text (the last expression's value), if any. */
  text?: string;
  results: CodeResult[];
  logs: { stdout: string[]; stderr: string[] };
  error?: ExecutionError;
  executionCount: number;
  timedOut: boolean;
}

interface WireCodeEvent {
  type: string;
  text?: string;
  result?: { text?: string; png?: string; html?: string; is_main_result?: boolean };
  error?: { name: string; value: string; traceback?: string[] };
  execution_count?: number;
  timed_out?: boolean;
  abort?: { code?: string; message?: string };
}

/** Reads a run_code stream to its end line. */
export async function readCodeStream(resp: Response, o: RunCodeOptions): Promise<Execution> {
  const requestId = resp.headers.get("x-request-id") ?? undefined;
  const ex: Execution = { results: [], logs: { stdout: [], stderr: [] }, executionCount: 0, timedOut: false };
  if (!resp.body) {
    throw new APIConnectionError({ status: 0, code: "connection_error", message: "code stream had no body", requestId });
  }
  for await (const ev of readNDJSON<WireCodeEvent>(resp.body, requestId)) {
    switch (ev.type) {
      case "stdout":
        ex.logs.stdout.push(ev.text ?? "");
        o.onStdout?.(ev.text ?? "");
        break;
      case "stderr":
        ex.logs.stderr.push(ev.text ?? "");
        o.onStderr?.(ev.text ?? "");
        break;
      case "result": {
        const w = ev.result ?? {};
        const r: CodeResult = { text: w.text, png: w.png, html: w.html, isMainResult: !!w.is_main_result };
        ex.results.push(r);
        if (r.isMainResult) ex.text = r.text;
        o.onResult?.(r);
        break;
      }
      case "error":
        if (ev.error) {
          ex.error = { name: ev.error.name, value: ev.error.value, traceback: (ev.error.traceback ?? []).join("") };
        }
        break;
      case "end":
        ex.executionCount = ev.execution_count ?? 0;
        ex.timedOut = !!ev.timed_out;
        return ex;
      case "abort":
        throw makeError({
          status: 0,
          code: ev.abort?.code || "internal",
          message: ev.abort?.message || "unknown error",
          requestId,
        });
    }
  }
  throw new APIConnectionError({ status: 0, code: "connection_error", message: "code stream ended before the run did", requestId });
}
