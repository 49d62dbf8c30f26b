// Unit tests that need no PandaStack server: base64, NDJSON line splitting,
// error mapping, request shapes and configuration, against a tiny local
// HTTP server on 127.0.0.1.

import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";

import {
  PandaStack,
  Sandbox,
  PandaStackError,
  InvalidArgumentError,
  AuthenticationError,
  PermissionDeniedError,
  NotFoundError,
  MethodNotAllowedError,
  ConflictError,
  GoneError,
  PayloadTooLargeError,
  OutputTooLargeError,
  RateLimitError,
  QuotaExceededError,
  InternalServerError,
  InsufficientStorageError,
  UnavailableError,
  RequestTimeoutError,
  APIConnectionError,
  encodeBase64,
  decodeBase64,
  VERSION,
} from "@pandastack/sdk";
// Internal module, reached through the compiled output.
import { readNDJSON } from "../dist/ndjson.js";

// ---- a scriptable local server ----

type Handler = (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => unknown;
interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

let server: http.Server;
let baseUrl = "";
let handler: Handler = (_req, _body, res) => void res.end();
let seen: Seen[] = [];

before(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      Promise.resolve(handler(req, body, res)).catch((err) => {
        res.destroy(err as Error);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

function serve(h: Handler): void {
  handler = h;
  seen = [];
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", "X-Request-Id": "req-123", ...headers });
  res.end(JSON.stringify(body));
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const wireSandbox = {
  id: "sb_1",
  team_id: "team_1",
  template: "base",
  template_id: "tpl_abc",
  state: "running",
  host: "local",
  accel: "tcg",
  metadata: { task: "x" },
  env: { A: "1" },
  cpus: 1,
  memory_mib: 512,
  created_at: "2025-01-02T03:04:05.123456789Z",
  expires_at: "2025-01-02T03:14:05Z",
};

function client(): PandaStack {
  return new PandaStack({ apiKey: "pds_test", baseUrl });
}

async function sandbox(): Promise<Sandbox> {
  serve((_req, _body, res) => json(res, 200, wireSandbox));
  return client().sandboxes.get("sb_1");
}

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++]!);
      else c.close();
    },
  });
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const v of it) out.push(v);
  return out;
}

// ---- base64 ----

describe("base64", () => {
  test("matches Buffer for every length 0..300 and a large buffer", () => {
    for (let n = 0; n <= 300; n++) {
      const b = new Uint8Array(randomBytes(n));
      const enc = encodeBase64(b);
      assert.equal(enc, Buffer.from(b).toString("base64"), `length ${n}`);
      assert.deepEqual(decodeBase64(enc), b, `length ${n}`);
    }
    const big = new Uint8Array(randomBytes(3 * 1024 * 1024 + 1));
    const enc = encodeBase64(big);
    assert.equal(enc, Buffer.from(big).toString("base64"));
    assert.deepEqual(decodeBase64(enc), big);
  });

  test("decodes unpadded, URL-safe and wrapped input; rejects garbage", () => {
    assert.equal(new TextDecoder().decode(decodeBase64("aGk")), "hi");
    assert.deepEqual(decodeBase64("-_8"), new Uint8Array([0xfb, 0xff]));
    assert.equal(new TextDecoder().decode(decodeBase64("aGVs\nbG8=\r\n")), "hello");
    assert.deepEqual(decodeBase64(""), new Uint8Array(0));
    assert.throws(() => decodeBase64("a$bc"), TypeError);
    assert.throws(() => decodeBase64("abcde"), TypeError);
  });
});

// ---- NDJSON ----

describe("NDJSON line splitting", () => {
  const lines = [
    { type: "start", pid: 7 },
    { type: "stdout", data: encodeBase64(new TextEncoder().encode("héllo wörld ✓ 🐼\n")) },
    { type: "stderr", data: "" },
    { type: "log", line: "ünïcode 🐼 in a JSON string" },
    { type: "exit", result: { exit_code: 0, timed_out: false, duration_ms: 1.5 } },
  ];
  const payload = new TextEncoder().encode(lines.map((l) => JSON.stringify(l)).join("\n") + "\n");

  test("every two-chunk split gives the same lines", async () => {
    for (let i = 0; i <= payload.length; i++) {
      const got = await collect(readNDJSON(streamOf([payload.slice(0, i), payload.slice(i)])));
      assert.deepEqual(got, lines, `split at ${i}`);
    }
  });

  test("one-byte chunks, blank lines, CRLF and a last line without newline", async () => {
    const text = "\n" + lines.map((l) => JSON.stringify(l)).join("\r\n\n");
    const bytes = new TextEncoder().encode(text);
    const chunks = Array.from(bytes, (b) => new Uint8Array([b]));
    assert.deepEqual(await collect(readNDJSON(streamOf(chunks))), lines);
  });

  test("many lines in one chunk", async () => {
    const many = Array.from({ length: 1000 }, (_, i) => ({ type: "log", line: `line ${i}` }));
    const bytes = new TextEncoder().encode(many.map((l) => JSON.stringify(l) + "\n").join(""));
    assert.deepEqual(await collect(readNDJSON(streamOf([bytes]))), many);
  });

  test("a malformed line is an invalid_response error", async () => {
    const bytes = new TextEncoder().encode('{"type":"start","pid":1}\nnot json\n');
    await assert.rejects(collect(readNDJSON(streamOf([bytes]))), (e: unknown) => {
      assert.ok(e instanceof PandaStackError);
      assert.equal(e.code, "invalid_response");
      return true;
    });
  });

  test("stopping early cancels the stream", async () => {
    let cancelled = false;
    const s = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(new TextEncoder().encode('{"n":1}\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const _ of readNDJSON(s)) break;
    assert.ok(cancelled);
  });
});

// ---- exec over a stream ----

describe("exec stream", () => {
  test("sends the right request and collects output, with callbacks as it arrives", async () => {
    const enc = new TextEncoder();
    // "é" (c3 a9) and "🐼" (f0 9f 90 bc) are split across stdout events.
    const part1 = new Uint8Array([...enc.encode("one "), 0xc3]);
    const part2 = new Uint8Array([0xa9, ...enc.encode(" two "), 0xf0, 0x9f]);
    const part3 = new Uint8Array([0x90, 0xbc, ...enc.encode("\n")]);
    const s = await sandbox();
    serve(async (_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "X-Request-Id": "req-exec" });
      const send = (o: unknown) => res.write(JSON.stringify(o) + "\n");
      send({ type: "start", pid: 42 });
      for (const p of [part1, part2, part3]) {
        await sleep(150);
        // Split the line itself across writes too.
        const line = JSON.stringify({ type: "stdout", data: encodeBase64(p) }) + "\n";
        res.write(line.slice(0, 5));
        await sleep(5);
        res.write(line.slice(5));
      }
      send({ type: "stderr", data: encodeBase64(enc.encode("warn\n")) });
      await sleep(300);
      send({ type: "exit", result: { exit_code: 3, signal: "", timed_out: false, duration_ms: 812.5 } });
      res.end();
    });
    const t0 = Date.now();
    const got: Array<[string, number]> = [];
    const errs: string[] = [];
    const r = await s.exec("echo hi", {
      timeoutSeconds: 30,
      env: { B: "2" },
      cwd: "/tmp",
      user: "root",
      stdin: "input",
      onStdout: (text) => got.push([text, Date.now() - t0]),
      onStderr: (text) => errs.push(text),
    });
    const total = Date.now() - t0;
    assert.equal(r.pid, 42);
    assert.equal(r.stdout, "one é two 🐼\n");
    assert.deepEqual(r.stdoutBytes, new Uint8Array([...part1, ...part2, ...part3]));
    assert.equal(r.stderr, "warn\n");
    assert.equal(r.exitCode, 3);
    assert.equal(r.signal, "");
    assert.equal(r.timedOut, false);
    assert.equal(r.durationMs, 812.5);
    assert.equal(got.map((g) => g[0]).join(""), "one é two 🐼\n");
    assert.ok(got[0]![0].startsWith("one"));
    assert.ok(got[0]![1] < total - 300, `first output at ${got[0]![1]} ms, end at ${total} ms`);
    assert.deepEqual(errs, ["warn\n"]);

    assert.equal(seen.length, 1);
    const req = seen[0]!;
    assert.equal(req.method, "POST");
    assert.equal(req.url, "/v1/sandboxes/sb_1/exec");
    assert.equal(req.headers["accept"], "application/x-ndjson");
    assert.equal(req.headers["content-type"], "application/json");
    assert.equal(req.headers["authorization"], "Bearer pds_test");
    assert.equal(req.headers["user-agent"], `pandastack-typescript/${VERSION}`);
    assert.deepEqual(JSON.parse(req.body.toString()), {
      cmd: "echo hi",
      env: { B: "2" },
      cwd: "/tmp",
      user: "root",
      timeout_seconds: 30,
      stdin: "input",
    });
  });

  test("args run without a shell; bytes stdin is base64; background returns a handle", async () => {
    const s = await sandbox();
    serve((_req, body, res) => {
      const b = JSON.parse(body.toString());
      if (b.background) return json(res, 202, { pid: 9 });
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.end('{"type":"start","pid":1}\n{"type":"exit","result":{"exit_code":0,"timed_out":false,"duration_ms":1}}\n');
    });
    const r = await s.exec("python3", { args: ["-c", "print(1)"], stdin: new Uint8Array([0, 255]) });
    assert.equal(r.stdout, "");
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { args: ["python3", "-c", "print(1)"], stdin_base64: "AP8=" });
    const p = await s.exec("sleep 100", { background: true });
    assert.equal(p.pid, 9);
    assert.deepEqual(JSON.parse(seen[1]!.body.toString()), { cmd: "sleep 100", background: true });
    assert.equal(seen[1]!.headers["accept"], "application/json");
  });

  test("an error line rejects with the typed error", async () => {
    const s = await sandbox();
    serve((_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson", "X-Request-Id": "rid-9" });
      res.end('{"type":"start","pid":1}\n{"type":"error","error":{"code":"gone","message":"sandbox expired"}}\n');
    });
    await assert.rejects(s.exec("true"), (e: unknown) => {
      assert.ok(e instanceof GoneError);
      assert.equal(e.status, 0);
      assert.equal(e.code, "gone");
      assert.equal(e.message, "sandbox expired");
      assert.equal(e.requestId, "rid-9");
      return true;
    });
  });

  test("a stream cut off before its exit line is an APIConnectionError", async () => {
    const s = await sandbox();
    serve((_req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.end('{"type":"start","pid":1}\n{"type":"stdout","data":"aGk="}\n{"type":"ex');
    });
    await assert.rejects(s.exec("true"), APIConnectionError);
  });

  test("aborting the signal closes the stream", async () => {
    const s = await sandbox();
    let closed = false;
    serve((req, _body, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.write('{"type":"start","pid":1}\n');
      res.on("close", () => (closed = true));
      void req;
    });
    const ac = new AbortController();
    const p = s.exec("sleep 100", { signal: ac.signal });
    await sleep(100);
    ac.abort();
    await assert.rejects(p, (e: unknown) => (e as Error).name === "AbortError");
    await sleep(100);
    assert.ok(closed);
  });
});

// ---- errors ----

describe("error mapping", () => {
  const cases: Array<[number, unknown, Function, string]> = [
    [400, { error: { code: "invalid_argument", message: "m" } }, InvalidArgumentError, "invalid_argument"],
    [401, { error: { code: "unauthorized", message: "m" } }, AuthenticationError, "unauthorized"],
    [403, { error: { code: "forbidden", message: "m" } }, PermissionDeniedError, "forbidden"],
    [404, { error: { code: "not_found", message: "m" } }, NotFoundError, "not_found"],
    [405, { error: { code: "method_not_allowed", message: "m" } }, MethodNotAllowedError, "method_not_allowed"],
    [409, { error: { code: "conflict", message: "m" } }, ConflictError, "conflict"],
    [410, { error: { code: "gone", message: "m" } }, GoneError, "gone"],
    [413, { error: { code: "too_large", message: "m" } }, PayloadTooLargeError, "too_large"],
    [422, { error: { code: "output_too_large", message: "m" } }, OutputTooLargeError, "output_too_large"],
    [429, { error: { code: "quota_exceeded", message: "m" } }, QuotaExceededError, "quota_exceeded"],
    [429, { error: { code: "rate_limited", message: "m" } }, RateLimitError, "rate_limited"],
    [500, { error: { code: "internal", message: "m" } }, InternalServerError, "internal"],
    [503, { error: { code: "unavailable", message: "m" } }, UnavailableError, "unavailable"],
    [504, { error: { code: "timeout", message: "m" } }, RequestTimeoutError, "timeout"],
    // The code wins over the status.
    [400, { error: { code: "gone", message: "m" } }, GoneError, "gone"],
    [500, { error: { code: "quota_exceeded", message: "m" } }, QuotaExceededError, "quota_exceeded"],
    // Unknown code: the status decides, the code is kept.
    [409, { error: { code: "brand_new", message: "m" } }, ConflictError, "brand_new"],
    // Not the API's JSON (e.g. a proxy): the status decides.
    [502, "<html>Bad Gateway</html>", UnavailableError, "unavailable"],
    [504, "", RequestTimeoutError, "timeout"],
    [401, { message: "no" }, AuthenticationError, "unauthorized"],
    [418, { error: { code: "teapot", message: "m" } }, PandaStackError, "teapot"],
  ];
  for (const [status, body, cls, code] of cases) {
    test(`${status} ${JSON.stringify(body).slice(0, 50)} -> ${cls.name}`, async () => {
      serve((_req, _b, res) => {
        if (typeof body === "string") {
          res.writeHead(status, { "Content-Type": "text/html", "X-Request-Id": "req-123" });
          res.end(body);
        } else json(res, status, body);
      });
      await assert.rejects(client().sandboxes.get("sb_1"), (e: unknown) => {
        assert.ok(e instanceof cls, `got ${(e as Error).constructor.name}`);
        assert.ok(e instanceof PandaStackError);
        assert.ok(e instanceof Error);
        const pe = e as PandaStackError;
        assert.equal(pe.status, status);
        assert.equal(pe.code, code);
        assert.equal(pe.requestId, "req-123");
        assert.equal(pe.name, cls.name);
        if (typeof body === "object" && (body as { error?: unknown }).error) assert.equal(pe.message, "m");
        else assert.match(pe.message, new RegExp(`^HTTP ${status}`));
        return true;
      });
    });
  }

  test("RateLimitError carries Retry-After", async () => {
    serve((_req, _b, res) => json(res, 429, { error: { code: "rate_limited", message: "slow down" } }, { "Retry-After": "7" }));
    await assert.rejects(client().sandboxes.list(), (e: unknown) => {
      assert.ok(e instanceof RateLimitError);
      assert.equal(e.retryAfterSeconds, 7);
      return true;
    });
  });

  test("QuotaExceededError is a RateLimitError without Retry-After", async () => {
    serve((_req, _b, res) => json(res, 429, { error: { code: "quota_exceeded", message: "max_sandboxes is 1" } }));
    await assert.rejects(client().sandboxes.create({ template: "base" }), (e: unknown) => {
      assert.ok(e instanceof QuotaExceededError);
      assert.ok(e instanceof RateLimitError);
      assert.equal(e.retryAfterSeconds, undefined);
      assert.match(e.message, /max_sandboxes is 1/);
      return true;
    });
  });

  test("an unreachable server is an APIConnectionError", async () => {
    const c = new PandaStack({ apiKey: "k", baseUrl: "http://127.0.0.1:1" });
    await assert.rejects(c.health(), (e: unknown) => {
      assert.ok(e instanceof APIConnectionError);
      assert.equal(e.status, 0);
      assert.equal(e.code, "connection_error");
      return true;
    });
  });

  test("routes an older server lacks (fork, snapshot, hibernate, wake) surface as typed errors", async () => {
    const s = await sandbox();
    serve((req, _b, res) => {
      if (req.url!.endsWith("/wake")) return json(res, 405, { error: { code: "method_not_allowed", message: "no" } });
      json(res, 404, { error: { code: "not_found", message: `no route for ${req.method} ${req.url}` } });
    });
    await assert.rejects(s.fork(), NotFoundError);
    await assert.rejects(s.snapshot(), NotFoundError);
    await assert.rejects(s.hibernate(), NotFoundError);
    await assert.rejects(s.wake(), MethodNotAllowedError);
    assert.deepEqual(
      seen.map((r) => `${r.method} ${r.url}`),
      ["fork", "snapshot", "hibernate", "wake"].map((x) => `POST /v1/sandboxes/sb_1/${x}`),
    );
  });
});

// ---- sandboxes, files ----

describe("requests", () => {
  test("sandbox fields are converted; list encodes metadata filters; kill is a DELETE", async () => {
    const s = await sandbox();
    assert.equal(s.id, "sb_1");
    assert.equal(s.teamId, "team_1");
    assert.equal(s.state, "running");
    assert.equal(s.accel, "tcg");
    assert.equal(s.memoryMib, 512);
    assert.deepEqual(s.metadata, { task: "x" });
    assert.ok(s.createdAt instanceof Date);
    assert.equal(s.createdAt.toISOString(), "2025-01-02T03:04:05.123Z");
    assert.equal(s.isLive, true);
    assert.equal(JSON.parse(JSON.stringify(s)).id, "sb_1");

    serve((_req, _b, res) => json(res, 200, { sandboxes: [wireSandbox, { ...wireSandbox, id: "sb 2/x" }] }));
    const list = await client().sandboxes.list({ metadata: { task: "x", "a b": "c&d" }, state: "all" });
    assert.deepEqual(list.map((x) => x.id), ["sb_1", "sb 2/x"]);
    const u = new URL(seen[0]!.url, baseUrl);
    assert.equal(u.pathname, "/v1/sandboxes");
    assert.equal(u.searchParams.get("metadata.task"), "x");
    assert.equal(u.searchParams.get("metadata.a b"), "c&d");
    assert.equal(u.searchParams.get("state"), "all");

    serve((_req, _b, res) => {
      res.writeHead(204);
      res.end();
    });
    await list[1]!.kill();
    assert.equal(seen[0]!.method, "DELETE");
    assert.equal(seen[0]!.url, "/v1/sandboxes/sb%202%2Fx");
    assert.equal(list[1]!.state, "killed");
  });

  test("create sends snake_case and leaves out empty fields", async () => {
    serve((_req, _b, res) => json(res, 201, wireSandbox));
    await client().sandboxes.create({ template: "base", ttlSeconds: 600, metadata: { task: "x" }, env: { A: "1" }, autoHibernateSeconds: 30 });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { template: "base", ttl_seconds: 600, metadata: { task: "x" }, env: { A: "1" }, auto_hibernate_seconds: 30 });
    serve((_req, _b, res) => json(res, 201, wireSandbox));
    await client().sandboxes.create({ template: "base", metadata: {} });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { template: "base" });
  });

  test("snapshots: export and import requests; fields converted; create from a snapshot", async () => {
    const ws = { id: "snap_1", team_id: "team_1", name: "n", sandbox_id: "sb_1", template: "base", template_id: "tpl_1", host: "local", size_bytes: 42, created_at: "2025-01-02T03:04:05Z" };
    serve((_req, _b, res) => json(res, 200, { ...ws, object_key: "snapshots/snap_1", exported_at: "2025-01-02T03:05:00Z" }));
    const e = await client().snapshots.export("snap 1/x");
    assert.equal(seen[0]!.method, "POST");
    assert.equal(seen[0]!.url, "/v1/snapshots/snap%201%2Fx/export");
    assert.deepEqual([e.objectKey, e.exportedAt?.toISOString(), e.exportError, e.sizeBytes, e.sandboxId], ["snapshots/snap_1", "2025-01-02T03:05:00.000Z", undefined, 42, "sb_1"]);
    serve((_req, _b, res) => json(res, 201, ws));
    const i = await client().snapshots.import("snapshots/snap_1", { name: "copy" });
    assert.equal(seen[0]!.url, "/v1/snapshots");
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { object_key: "snapshots/snap_1", name: "copy" });
    assert.deepEqual([i.objectKey, i.exportedAt], [undefined, undefined]);
    serve((_req, _b, res) => json(res, 201, ws));
    await client().snapshots.import("snapshots/snap_1");
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { object_key: "snapshots/snap_1" });
    serve((_req, _b, res) => json(res, 409, { error: { code: "conflict", message: "name taken" } }));
    await assert.rejects(client().snapshots.import("snapshots/snap_1"), (e: unknown) => e instanceof ConflictError);
    serve((_req, _b, res) => json(res, 201, wireSandbox));
    await client().sandboxes.create({ snapshot: "snap_1" });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { snapshot: "snap_1" });
  });

  test("caCertificate: GET /v1/ca.pem as PEM text; a custom build names its team", async () => {
    serve((_req, _b, res) => {
      res.writeHead(200, { "Content-Type": "application/x-pem-file" });
      res.end("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    });
    assert.equal(await client().caCertificate(), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    assert.equal(seen[0]!.url, "/v1/ca.pem");
    assert.equal(seen[0]!.headers["accept"], "application/x-pem-file");
    const done = { type: "done", template: { team_id: "team_1", name: "web", id: "t", cpus: 1, memory_mib: 512, disk_mib: 2048, accel: "tcg", built_at: "2025-01-02T03:04:05Z", build_ms: 1 } };
    serve((_req, _b, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.end(JSON.stringify(done) + "\n");
    });
    const t = await client().templates.buildCustom("web", { spec: "FROM base\n", team: "acme" });
    assert.equal(t.teamId, "team_1");
    assert.equal(new URL(seen[0]!.url, "http://x").searchParams.get("team"), "acme");
  });

  test("volumes: create, list, delete, 507 typed; mounts sent at create", async () => {
    const wv = { id: "vol_1", team_id: "team_1", name: "data", size_mib: 64, created_at: "2025-01-02T03:04:05Z", sandbox_id: "", host: "local" };
    serve((req, _b, res) => {
      if (req.method === "POST" && req.url === "/v1/volumes") return json(res, 201, wv);
      if (req.method === "GET" && req.url === "/v1/volumes") return json(res, 200, { volumes: [{ ...wv, sandbox_id: "sb_1", mount_path: "/data" }] });
      res.writeHead(204);
      res.end();
    });
    const v = await client().volumes.create({ name: "data", sizeMib: 64 });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { name: "data", size_mib: 64 });
    assert.equal(v.sizeMib, 64);
    assert.equal(v.createdAt.toISOString(), "2025-01-02T03:04:05.000Z");
    const list = await client().volumes.list();
    assert.equal(list[0]!.sandboxId, "sb_1");
    assert.equal(list[0]!.mountPath, "/data");
    await client().volumes.delete("data");
    assert.equal(seen[2]!.method, "DELETE");
    assert.equal(seen[2]!.url, "/v1/volumes/data");
    serve((_req, _b, res) => json(res, 507, { error: { code: "insufficient_storage", message: "does not fit" } }));
    await assert.rejects(client().volumes.create({ name: "huge", sizeMib: 1 << 20 }), (e: unknown) => e instanceof InsufficientStorageError);
    serve((_req, _b, res) => json(res, 201, wireSandbox));
    await client().sandboxes.create({ template: "base", volumes: [{ volume: "data", path: "/data" }] });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { template: "base", volumes: [{ volume: "data", path: "/data" }] });
  });

  test("databases: create sends snake_case, answers camelCase; hibernate by name", async () => {
    const wd = { id: "db-1", name: "orders", state: "running", host: "db-1.db.localhost", port: 5432, user: "orders_owner",
      database: "orders", machine_id: "sbx_1", created_at: "2025-01-02T03:04:05Z", auto_hibernate_seconds: 300, password: "pw",
      connection_uri: "postgres://orders_owner:pw@db-1.db.localhost:5432/orders?sslmode=require",
      pooled_connection_uri: "postgres://orders_owner:pw@db-1-pooler.db.localhost:5432/orders?sslmode=require", http_url: "http://x/sql" };
    serve((req, _b, res) => {
      if (req.method === "POST" && req.url === "/v1/databases") return json(res, 201, wd);
      return json(res, 200, { ...wd, state: "hibernated", password: undefined });
    });
    const d = await client().databases.create({ name: "orders", autoHibernateSeconds: 300 });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { name: "orders", auto_hibernate_seconds: 300 });
    assert.equal(d.pooledConnectionUri, wd.pooled_connection_uri);
    assert.equal(d.httpUrl, "http://x/sql");
    assert.equal(d.autoHibernateSeconds, 300);
    const h = await client().databases.hibernate("orders");
    assert.equal(seen[1]!.url, "/v1/databases/orders/hibernate");
    assert.equal(h.state, "hibernated");
    const f = await client().databases.fork("orders", "orders-copy");
    assert.equal(seen[2]!.url, "/v1/databases/orders/fork");
    assert.deepEqual(JSON.parse(seen[2]!.body.toString()), { name: "orders-copy" });
    assert.equal(f.id, "db-1");
    await client().databases.create({ name: "big", sizeMib: 4096 });
    assert.deepEqual(JSON.parse(seen[3]!.body.toString()), { name: "big", size_mib: 4096 });
    await client().databases.restore("orders", "orders-then", new Date("2026-11-24T10:30:00Z"), { sizeMib: 2048 });
    assert.equal(seen[4]!.url, "/v1/databases/orders/restore");
    assert.deepEqual(JSON.parse(seen[4]!.body.toString()), { name: "orders-then", target_time: "2026-11-24T10:30:00.000Z", size_mib: 2048 });
  });

  test("network: policy in snake_case, getHost from the server's domain", async () => {
    serve((_req, _b, res) => json(res, 201, { ...wireSandbox, domain: "sbx.example.com", network: { egress: "deny", allow_domains: ["*.pypi.org"] } }));
    const s = await client().sandboxes.create({ template: "base", network: { allowDomains: ["*.pypi.org"], publicPorts: [8080] } });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { template: "base", network: { allow_domains: ["*.pypi.org"], public_ports: [8080] } });
    assert.equal(s.getHost(8080), `8080-${s.id}.sbx.example.com`);
    assert.deepEqual(s.network, { egress: "deny", allowDomains: ["*.pypi.org"] });
    serve((_req, _b, res) => json(res, 200, { egress: "allow", denied_connections: 3 }));
    const st = await s.setNetwork({ egress: "allow" });
    assert.equal(seen[0]!.method, "PUT");
    assert.equal(seen[0]!.url, `/v1/sandboxes/${s.id}/network`);
    assert.deepEqual(st, { egress: "allow", deniedConnections: 3 });
  });

  test("file upload streams raw bytes with a mode; download detects truncation", async () => {
    const s = await sandbox();
    const fi = {
      name: "f",
      path: "/tmp/f",
      size: 6,
      mode: 0o755,
      is_dir: false,
      mod_time: "2025-01-01T00:00:00Z",
    };
    serve((_req, _b, res) => json(res, 200, fi));
    let i = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (i++ < 3) c.enqueue(new Uint8Array([i, i]));
        else c.close();
      },
    });
    const got = await s.filesystem.write("/tmp/f", stream, { mode: 0o755 });
    assert.equal(got.isDir, false);
    assert.equal(got.mode, 0o755);
    assert.ok(got.modTime instanceof Date);
    const u = new URL(seen[0]!.url, baseUrl);
    assert.equal(seen[0]!.method, "PUT");
    assert.equal(u.searchParams.get("path"), "/tmp/f");
    assert.equal(u.searchParams.get("mode"), "0755");
    assert.equal(seen[0]!.headers["content-type"], "application/octet-stream");
    assert.equal(seen[0]!.headers["transfer-encoding"], "chunked");
    assert.deepEqual([...seen[0]!.body], [1, 1, 2, 2, 3, 3]);

    serve((_req, _b, res) => json(res, 200, fi));
    await s.filesystem.write("/tmp/f", "héllo");
    assert.equal(seen[0]!.body.toString(), "héllo");

    serve((_req, _b, res) => {
      res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": "6" });
      res.end(Buffer.from("héllo"));
    });
    assert.equal(await s.filesystem.read("/tmp/f"), "héllo");
    assert.equal(seen[0]!.headers["accept"], "application/octet-stream");

    serve((_req, _b, res) => {
      res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": "1000" });
      res.write(Buffer.alloc(100));
      setTimeout(() => res.destroy(), 50);
    });
    await assert.rejects(s.filesystem.readBytes("/tmp/f"), APIConnectionError);
  });

  test("exists maps NotFoundError to false; remove and rename send the right requests", async () => {
    const s = await sandbox();
    serve((_req, _b, res) => json(res, 404, { error: { code: "not_found", message: "no such file" } }));
    assert.equal(await s.filesystem.exists("/nope"), false);
    serve((_req, _b, res) => {
      res.writeHead(204);
      res.end();
    });
    await s.filesystem.remove("/tmp/d", { recursive: true });
    await s.filesystem.rename("/a", "/b");
    await s.filesystem.makeDir("/tmp/x/y");
    assert.equal(seen[0]!.url, "/v1/sandboxes/sb_1/files?path=%2Ftmp%2Fd&recursive=true");
    assert.deepEqual(JSON.parse(seen[1]!.body.toString()), { from: "/a", to: "/b" });
    assert.deepEqual(JSON.parse(seen[2]!.body.toString()), { path: "/tmp/x/y" });
  });
});

// ---- configuration ----

describe("configuration", () => {
  const saved = { ...process.env };
  const restore = () => {
    for (const k of ["PANDASTACK_API_KEY", "PANDASTACK_TOKEN", "PANDASTACK_BASE_URL"]) {
      if (saved[k] === undefined) delete process.env[k];
      else process.env[k] = saved[k];
    }
  };

  test("reads PANDASTACK_API_KEY / PANDASTACK_TOKEN / PANDASTACK_BASE_URL; options win", async () => {
    try {
      delete process.env["PANDASTACK_API_KEY"];
      delete process.env["PANDASTACK_TOKEN"];
      delete process.env["PANDASTACK_BASE_URL"];
      const d = new PandaStack();
      assert.equal(d.baseUrl, "http://localhost:8080");
      assert.equal(d.hasApiKey, false);

      process.env["PANDASTACK_BASE_URL"] = baseUrl + "/";
      process.env["PANDASTACK_TOKEN"] = "pds_token";
      serve((_req, _b, res) => json(res, 201, wireSandbox));
      const s = await Sandbox.create({ template: "base" });
      assert.equal(s.id, "sb_1");
      assert.equal(seen[0]!.headers["authorization"], "Bearer pds_token");

      process.env["PANDASTACK_API_KEY"] = "pds_key";
      const c = new PandaStack();
      assert.equal(c.baseUrl, baseUrl);
      serve((_req, _b, res) => json(res, 200, { status: "ok", version: "v", accel: "tcg", isolation: "none" }));
      await c.health();
      assert.equal(seen[0]!.headers["authorization"], "Bearer pds_key");

      const o = new PandaStack({ apiKey: "pds_opt", baseUrl: baseUrl + "//", headers: { "X-Extra": "1" } });
      await o.health();
      assert.equal(seen[1]!.headers["authorization"], "Bearer pds_opt");
      assert.equal(seen[1]!.headers["x-extra"], "1");
    } finally {
      restore();
    }
  });

  test("a custom fetch is used", async () => {
    const calls: string[] = [];
    const c = new PandaStack({
      apiKey: "k",
      baseUrl: "http://example.invalid",
      fetch: async (url, init) => {
        calls.push(`${init.method} ${url}`);
        return new Response(JSON.stringify({ status: "ok", version: "1", accel: "kvm", isolation: "x" }), { status: 200 });
      },
    });
    assert.equal((await c.health()).accel, "kvm");
    assert.deepEqual(calls, ["GET http://example.invalid/v1/health"]);
  });

  test("VERSION matches package.json", () => {
    const pkg = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
    assert.equal(VERSION, pkg.version);
  });
});

describe("custom template build context", () => {
  test("packBuildContext writes a tar with the spec first", async () => {
    const { packBuildContext } = await import("../dist/index.js");
    const tar = packBuildContext("FROM base\n", { "app/main.py": "print(1)\n" });
    const dec = new TextDecoder();
    const name = (off: number) => dec.decode(tar.subarray(off, off + 100)).replace(/\0.*$/s, "");
    const size = (off: number) => parseInt(dec.decode(tar.subarray(off + 124, off + 135)), 8);
    assert.equal(name(0), ".pandastack-spec");
    assert.equal(size(0), 10);
    assert.equal(dec.decode(tar.subarray(512, 522)), "FROM base\n");
    assert.equal(name(1024), "app/main.py");
    assert.equal(dec.decode(tar.subarray(1536, 1545)), "print(1)\n");
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 0x20 : tar[i]!;
    assert.equal(parseInt(dec.decode(tar.subarray(148, 155)), 8), sum);
    assert.equal(tar.length % 512, 0);
    assert.throws(() => packBuildContext("FROM base\n", { "../x": "y" }), /outside the context/);
  });
});

// ---- keys and quotas ----

describe("keys and quotas", () => {
  test("keys.list, revoke and rotate send the documented requests", async () => {
    serve((req, _b, res) => {
      if (req.method === "GET")
        return json(res, 200, {
          keys: [{ id: "key_1", team: "acme", team_id: "t1", name: "ci", prefix: "pds_abcdefgh", admin: false, created_at: "2024-05-06T07:08:09Z", revoked_at: "2024-05-07T07:08:09Z" }],
        });
      if (req.method === "DELETE") return void res.writeHead(204).end();
      return json(res, 201, { id: "key_2", key: "pds_new", team: "acme", team_id: "t1", name: "ci", prefix: "pds_new", admin: false });
    });
    const c = client();
    const keys = await c.keys.list({ team: "acme" });
    assert.equal(keys[0]!.teamId, "t1");
    assert.ok(keys[0]!.revokedAt instanceof Date);
    await c.keys.revoke("key_1");
    const k = await c.keys.rotate("key_1");
    assert.equal(k.key, "pds_new");
    assert.deepEqual(
      seen.map((s) => `${s.method} ${s.url}`),
      ["GET /v1/keys?team=acme", "DELETE /v1/keys/key_1", "POST /v1/keys/key_1/rotate"],
    );
  });

  test("quotas.set sends wire names, null resets", async () => {
    const wire = {
      team: "acme", team_id: "t1", max_sandboxes: 5, max_service_machines: 5, max_snapshots: 50, max_volumes: 20,
      max_concurrent_builds: 2, max_vcpus: 32, max_memory_mib: 16384, requests_per_second: 100, burst: 200,
      overridden: ["max_sandboxes"],
      usage: { sandboxes: 1, service_machines: 0, snapshots: 0, volumes: 0, builds: 0, vcpus: 1, memory_mib: 512 },
    };
    serve((_req, _b, res) => json(res, 200, wire));
    const c = client();
    const q = await c.quotas.set("acme", { maxSandboxes: 5, requestsPerSecond: null });
    assert.equal(q.maxSandboxes, 5);
    assert.equal(q.usage.memoryMib, 512);
    assert.equal(seen[0]!.method, "PUT");
    assert.equal(seen[0]!.url, "/v1/teams/acme/quotas");
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { max_sandboxes: 5, requests_per_second: null });
    await c.quotas.get();
    assert.equal(seen[1]!.url, "/v1/quotas");
  });
});

describe("apps", () => {
  const wa = { id: "app_1", team_id: "team_1", name: "web", git_url: "", branch: "main", env_keys: ["TOKEN"], health_path: "/",
    health_timeout_seconds: 60, auto_hibernate_seconds: 30, live_deploy_id: "", url: "http://web.apps.localhost",
    webhook_url: "/v1/apps/app_1/hooks/github", git_remote: "/git/web.git", created_at: "2025-01-02T03:04:05Z" };
  const wd = { id: "dep_1", app_id: "app_1", status: "queued", ref: "main", created_at: "2025-01-02T03:04:05Z", updated_at: "2025-01-02T03:04:05Z" };

  test("create sends snake_case and answers camelCase; a taken name is ConflictError", async () => {
    serve((req, b, res) => {
      const name = JSON.parse(b.toString()).name;
      if (name === "taken") return json(res, 409, { error: { code: "conflict", message: "app taken exists" } });
      json(res, 201, { ...wa, webhook_secret: "whsec_x" });
    });
    const a = await client().apps.create({ name: "web", env: { TOKEN: "t" }, healthPath: "/up", autoHibernateSeconds: 30 });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { name: "web", env: { TOKEN: "t" }, health_path: "/up", auto_hibernate_seconds: 30 });
    assert.equal(seen[0]!.url, "/v1/apps");
    assert.deepEqual([a.name, a.gitUrl, a.gitRemote, a.webhookSecret, a.autoHibernateSeconds], ["web", "", "/git/web.git", "whsec_x", 30]);
    assert.deepEqual(a.envKeys, ["TOKEN"]);
    assert.ok(a.createdAt instanceof Date);
    await assert.rejects(client().apps.create({ name: "taken" }), (e: unknown) => e instanceof ConflictError);
  });

  test("deploy, wait until done, logs, rollback, git remote, delete", async () => {
    let polls = 0;
    serve((req, _b, res) => {
      if (req.method === "POST" && req.url === "/v1/apps/web/deploys") return json(res, 202, wd);
      if (req.url === "/v1/apps/web/deploys/dep_1") {
        polls++;
        return json(res, 200, { ...wd, status: polls >= 2 ? "live" : "building", framework: "static", commit: "a".repeat(40), log: "cloning\n" });
      }
      if (req.url === "/v1/apps/web/deploys/dep_1/logs") {
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
        return res.end("cloning\nframework static\n");
      }
      if (req.url === "/v1/apps/web/deploys") return json(res, 200, { deploys: [wd] });
      if (req.url === "/v1/apps/web/previews") {
        return json(res, 200, { previews: [{ app_id: "app_1", number: 7, head_ref: "feature", head_sha: "b".repeat(40), deploy_id: "dep_7",
          live_deploy_id: "dep_7", status: "live", url: "http://pr-7--web.apps.localhost", created_at: "2025-01-02T03:04:05Z", updated_at: "2025-01-02T03:04:05Z" }] });
      }
      if (req.url === "/v1/apps/web/rollback") return json(res, 200, { ...wd, id: "dep_0", status: "live" });
      if (req.method === "GET" && req.url === "/v1/apps/web") return json(res, 200, wa);
      if (req.method === "DELETE" && req.url === "/v1/apps/web") return void res.writeHead(204).end();
      json(res, 404, { error: { code: "not_found", message: "app not found" } });
    });
    const c = client();
    const d = await c.apps.deploy("web", { ref: "v2" });
    assert.deepEqual(JSON.parse(seen[0]!.body.toString()), { ref: "v2" });
    assert.equal(d.status, "queued");
    const done = await c.apps.wait("web", d.id, { pollMs: 5 });
    assert.deepEqual([done.status, done.framework, done.log, polls], ["live", "static", "cloning\n", 2]);
    assert.match(await c.apps.logs("web", "dep_1"), /framework static/);
    assert.equal((await c.apps.deploys("web"))[0]!.id, "dep_1");
    const [pr] = await c.apps.previews("web");
    assert.deepEqual([pr!.number, pr!.url, pr!.liveDeployId, pr!.createdAt.getUTCFullYear()], [7, "http://pr-7--web.apps.localhost", "dep_7", 2025]);
    const r = await c.apps.rollback("web", { deployId: "dep_0" });
    assert.deepEqual(JSON.parse(seen.at(-1)!.body.toString()), { deploy_id: "dep_0" });
    assert.deepEqual([r.id, r.status], ["dep_0", "live"]);
    assert.equal(await c.apps.gitRemoteUrl("web"), baseUrl + "/git/web.git");
    assert.equal(await c.apps.gitRemoteUrl("web", { withKey: true }), baseUrl.replace("http://", "http://pandastack:pds_test@") + "/git/web.git");
    await c.apps.delete("web");
    assert.deepEqual([seen.at(-1)!.method, seen.at(-1)!.url], ["DELETE", "/v1/apps/web"]);
    await assert.rejects(c.apps.get("nope"), (e: unknown) => e instanceof NotFoundError);
  });
});
