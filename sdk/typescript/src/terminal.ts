// Interactive terminals: GET /v1/sandboxes/{id}/pty, a WebSocket. Binary
// messages are the terminal's bytes both ways; text messages are JSON
// control messages (see api/openapi.yaml, TerminalMessage).

import { makeError, type ErrorCode } from "./errors.js";
import type { HttpClient } from "./http.js";

export interface TerminalOptions {
  /** Command line (default: the user's login shell). */
  cmd?: string;
  rows?: number;
  cols?: number;
  user?: string;
  cwd?: string;
  envs?: Record<string, string>;
  /** Called with each chunk of output, as the program wrote it. */
  onData?: (data: Uint8Array) => void;
}

export interface TerminalExit {
  exitCode: number;
  signal?: string;
}

interface Message {
  type: string;
  session_id?: string;
  pid?: number;
  offset?: number;
  grace_seconds?: number;
  exit_code?: number;
  signal?: string;
  code?: string;
  message?: string;
}

type WS = {
  binaryType: string;
  readyState: number;
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code: number }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
};

/**
 * An interactive terminal in a sandbox. Output goes to `onData`; `write`
 * types input. If the connection drops it reattaches by itself (the output
 * made meanwhile arrives); `close()` leaves the session for
 * `sandbox.reattachTerminal` within `graceSeconds`. Needs a runtime whose
 * global WebSocket takes headers: Node 22+ (Node 20 with
 * --experimental-websocket) or Bun.
 */
export class Terminal {
  sessionId = "";
  pid = 0;
  graceSeconds = 0;
  /** Output bytes received so far. */
  offset = 0;
  readonly #http: HttpClient;
  readonly #path: string;
  readonly #onData: (data: Uint8Array) => void;
  #ws: WS | undefined;
  #closed = false;
  #exit: Promise<TerminalExit>;
  #resolve!: (e: TerminalExit) => void;
  #reject!: (e: Error) => void;

  /** @internal Use `sandbox.openTerminal`. */
  constructor(http: HttpClient, path: string, onData?: (data: Uint8Array) => void) {
    this.#http = http;
    this.#path = path;
    this.#onData = onData ?? (() => {});
    this.#exit = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    this.#exit.catch(() => {}); // a failure is reported by wait()
  }

  /** @internal */
  async dial(query: URLSearchParams): Promise<void> {
    const Ctor = (globalThis as { WebSocket?: new (url: string, init?: unknown) => WS }).WebSocket;
    if (!Ctor) throw makeError({ status: 0, code: "unavailable" as ErrorCode, message: "pandastack: terminals need a global WebSocket (Node 22+, or node --experimental-websocket)" });
    const url = this.#http.url(this.#path, query).replace(/^http/, "ws");
    const ws = new Ctor(url, { headers: this.#http.upgradeHeaders() });
    ws.binaryType = "arraybuffer";
    await new Promise<void>((resolve, reject) => {
      let started = false;
      ws.onmessage = (ev) => {
        if (typeof ev.data !== "string") {
          const b = new Uint8Array(ev.data as ArrayBuffer);
          this.offset += b.length;
          this.#onData(b);
          return;
        }
        const m = JSON.parse(ev.data) as Message;
        if (m.type === "session") {
          this.sessionId = m.session_id ?? "";
          this.pid = m.pid ?? 0;
          this.graceSeconds = m.grace_seconds ?? 0;
          if (typeof m.offset === "number") this.offset = m.offset;
          started = true;
          resolve();
        } else if (m.type === "exit") {
          const e: TerminalExit = { exitCode: m.exit_code ?? 0 };
          if (m.signal) e.signal = m.signal;
          this.#closed = true;
          this.#resolve(e);
        } else if (m.type === "error" && m.code !== "invalid_argument") {
          this.#closed = true;
          this.#reject(makeError({ status: 0, code: (m.code ?? "internal") as ErrorCode, message: m.message ?? "" }));
        }
      };
      let failed = false;
      const failedUpgrade = () => {
        if (started || failed) return;
        failed = true;
        // The WebSocket API hides the HTTP answer: ask again plainly.
        this.#http.send({ method: "GET", path: this.#path, query }).then(
          () => reject(new Error("pandastack: the terminal's WebSocket upgrade failed")),
          reject,
        );
      };
      ws.onclose = () => {
        if (!started) {
          failedUpgrade();
          return;
        }
        if (!this.#closed) {
          this.dial(new URLSearchParams({ session: this.sessionId, offset: String(this.offset) })).catch((e) => {
            this.#closed = true;
            this.#reject(e as Error);
          });
        }
      };
      ws.onerror = () => failedUpgrade(); // some runtimes fire no close after a refused upgrade
    });
    this.#ws = ws;
  }

  /** Types input into the terminal. */
  write(data: string | Uint8Array): void {
    this.#ws?.send(typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  #control(m: Record<string, unknown>): void {
    this.#ws?.send(JSON.stringify(m));
  }

  /** Changes the terminal's size; the program gets SIGWINCH. */
  resize(rows: number, cols: number): void {
    this.#control({ type: "resize", rows, cols });
  }

  /** Sends a signal (e.g. "INT") to the foreground job, as ^C would. */
  sendSignal(signal: string): void {
    this.#control({ type: "signal", signal });
  }

  /** Ends the terminal's command. */
  kill(): void {
    this.#control({ type: "kill" });
  }

  /** Resolves with how the command ended. */
  wait(): Promise<TerminalExit> {
    return this.#exit;
  }

  /** Drops the connection; the session waits `graceSeconds` for a reattach. */
  close(): void {
    this.#closed = true;
    this.#ws?.close();
  }
}
