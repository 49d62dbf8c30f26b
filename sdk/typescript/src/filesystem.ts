// A sandbox's file system: raw-byte downloads and uploads (streamed both
// ways) plus list/stat/mkdir/remove/rename.

import { APIConnectionError, NotFoundError } from "./errors.js";
import type { HttpClient } from "./http.js";
import { describe, isAbort } from "./ndjson.js";
import {
  toFileInfo,
  type FileInfo,
  type RemoveOptions,
  type RequestOptions,
  type WireFileInfo,
  type WriteData,
  type WriteOptions,
} from "./types.js";

/** A sandbox's file system. Paths are absolute. Get it as `sandbox.filesystem` (or `sandbox.files`). */
/** Options of `read`: the format of the result (E2B's names). */
export interface ReadOptions extends RequestOptions {
  format?: "text" | "bytes" | "blob" | "stream";
}

export class Filesystem {
  readonly #http: HttpClient;
  readonly #base: string;

  /** @internal */
  constructor(http: HttpClient, sandboxPath: string) {
    this.#http = http;
    this.#base = sandboxPath;
  }

  /**
   * Streams a file's bytes. The stream errors with an APIConnectionError if
   * the transfer is cut short (fewer bytes than Content-Length). Cancel it
   * to stop the download.
   */
  async readStream(path: string, opts: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const resp = await this.#http.send({
      method: "GET",
      path: this.#base + "/files",
      query: { path },
      accept: "application/octet-stream",
      signal: opts.signal,
    });
    const requestId = resp.headers.get("x-request-id") ?? undefined;
    const cl = resp.headers.get("content-length");
    const expected = cl !== null && /^\d+$/.test(cl) ? Number(cl) : -1;
    if (!resp.body) return new ReadableStream<Uint8Array>({ start: (c) => c.close() });
    const reader = resp.body.getReader();
    let got = 0;
    return new ReadableStream<Uint8Array>({
      async pull(controller) {
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } catch (cause) {
          controller.error(
            isAbort(cause)
              ? cause
              : new APIConnectionError({
                  status: 0,
                  code: "connection_error",
                  message: `read ${path}: download broke after ${got} bytes: ${describe(cause)}`,
                  requestId,
                  cause,
                }),
          );
          return;
        }
        if (r.done) {
          if (expected >= 0 && got !== expected) {
            controller.error(
              new APIConnectionError({
                status: 0,
                code: "connection_error",
                message: `read ${path}: got ${got} of ${expected} bytes`,
                requestId,
              }),
            );
          } else controller.close();
          return;
        }
        got += r.value.length;
        controller.enqueue(r.value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
  }

  /** Returns a file's contents as bytes. For large files prefer `readStream`. */
  async readBytes(path: string, opts: RequestOptions = {}): Promise<Uint8Array> {
    const stream = await this.readStream(path, opts);
    const reader = stream.getReader();
    const parts: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      parts.push(r.value);
      total += r.value.length;
    }
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
   * Returns a file's contents in one of E2B's formats: `text` (the default:
   * UTF-8, and bytes that are not valid UTF-8 throw a TypeError instead of
   * coming back altered), `bytes`, `blob` or `stream`.
   */
  read(path: string, opts?: ReadOptions & { format?: "text" }): Promise<string>;
  read(path: string, opts: ReadOptions & { format: "bytes" }): Promise<Uint8Array>;
  read(path: string, opts: ReadOptions & { format: "blob" }): Promise<Blob>;
  read(path: string, opts: ReadOptions & { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts: ReadOptions = {}): Promise<string | Uint8Array | Blob | ReadableStream<Uint8Array>> {
    switch (opts.format ?? "text") {
      case "text":
        return new TextDecoder("utf-8", { fatal: true }).decode(await this.readBytes(path, opts));
      case "bytes":
        return this.readBytes(path, opts);
      case "blob":
        return new Blob([(await this.readBytes(path, opts)) as Uint8Array<ArrayBuffer>]);
      case "stream":
        return this.readStream(path, opts);
      default:
        throw new TypeError(`read: format must be "text", "bytes", "blob" or "stream", not ${JSON.stringify(opts.format)}`);
    }
  }

  /**
   * Creates or replaces a file. `data` may be text (written as UTF-8), bytes,
   * a Blob, or a ReadableStream of bytes (streamed without holding it in
   * memory).
   */
  async write(path: string, data: WriteData, opts: WriteOptions = {}): Promise<FileInfo> {
    const query: Record<string, string> = { path };
    if (opts.mode !== undefined) {
      query["mode"] = typeof opts.mode === "number" ? opts.mode.toString(8).padStart(4, "0") : opts.mode;
    }
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    const w = await this.#http.json<WireFileInfo>({
      method: "PUT",
      path: this.#base + "/files",
      query,
      body,
      signal: opts.signal,
    });
    return toFileInfo(w);
  }

  /** Lists a directory's entries, by name. */
  async list(path: string, opts: RequestOptions = {}): Promise<FileInfo[]> {
    const w = await this.#http.json<{ entries: WireFileInfo[] }>({
      method: "GET",
      path: this.#base + "/files/list",
      query: { path },
      signal: opts.signal,
    });
    return (w.entries ?? []).map(toFileInfo);
  }

  /** Describes a path. Rejects with NotFoundError if there is nothing there. */
  async stat(path: string, opts: RequestOptions = {}): Promise<FileInfo> {
    const w = await this.#http.json<WireFileInfo>({
      method: "GET",
      path: this.#base + "/files/stat",
      query: { path },
      signal: opts.signal,
    });
    return toFileInfo(w);
  }

  /** Reports whether a path exists. */
  async exists(path: string, opts: RequestOptions = {}): Promise<boolean> {
    try {
      await this.stat(path, opts);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError) return false;
      throw err;
    }
  }

  /** Creates a directory and any missing parents (no error if it exists). */
  async makeDir(path: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json({ method: "POST", path: this.#base + "/files/mkdir", json: { path }, signal: opts.signal });
  }

  /** Removes a file or an empty directory; with `recursive`, a directory and everything in it. */
  async remove(path: string, opts: RemoveOptions = {}): Promise<void> {
    await this.#http.json({
      method: "DELETE",
      path: this.#base + "/files",
      query: { path, recursive: opts.recursive ? "true" : "false" },
      signal: opts.signal,
    });
  }

  /** Renames or moves a file or directory. */
  async rename(from: string, to: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json({ method: "POST", path: this.#base + "/files/rename", json: { from, to }, signal: opts.signal });
  }
}
