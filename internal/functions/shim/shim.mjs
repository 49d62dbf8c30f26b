// PandaStack function shim for Node: imports the handler once (before the
// function's snapshot is taken), then serves invocations on a TCP port on
// the guest's loopback: one connection per invocation, one JSON line each
// way ({"event", "context"} in; {"ok", "result" | "error", "logs"} out).
// ES modules (export async function handler) and CommonJS
// (exports.handler) both load.
// Usage: node shim.mjs DIR FILE FUNCTION PORT STATEDIR
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [dir, file, func, portText, state] = process.argv.slice(2);

function fail(msg) {
  fs.writeFileSync(path.join(state, "error"), msg);
  process.exit(1);
}

let handler;
try {
  const found = [".mjs", ".js", ".cjs"].map((ext) => path.join(dir, file + ext)).find((p) => fs.existsSync(p));
  if (!found) fail(`handler file ${file}.js (or .mjs, .cjs) not found in the bundle`);
  process.chdir(dir);
  const mod = await import(pathToFileURL(found).href);
  handler = mod[func] ?? mod.default?.[func];
  if (typeof handler !== "function") fail(`${path.basename(found)} exports no function ${func}`);
} catch (e) {
  fail(e && e.stack ? String(e.stack) : String(e));
}

function context(d) {
  return {
    invocationId: d.invocation_id ?? "",
    functionName: d.function_name ?? "",
    functionVersion: d.function_version ?? 0,
    trigger: d.trigger ?? "api",
    executionId: d.execution_id ?? "",
    scheduledTime: d.scheduled_time ?? "",
    deadlineMs: d.deadline_ms ?? 0,
    getRemainingTimeInMillis() {
      return Math.max(0, Math.floor(this.deadlineMs - Date.now()));
    },
  };
}

async function invoke(line) {
  let logs = "";
  const out = process.stdout.write, err = process.stderr.write;
  process.stdout.write = process.stderr.write = (c, ...rest) => {
    logs += String(c);
    const cb = rest.find((r) => typeof r === "function");
    if (cb) cb();
    return true;
  };
  try {
    const body = JSON.parse(line);
    if (body.warmup) return warmup(body);
    const result = await handler(body.event, context(body.context ?? {}));
    return JSON.stringify({ ok: true, result: result === undefined ? null : result, logs });
  } catch (e) {
    const type = (e && e.constructor && e.constructor.name) || "Error";
    const message = String(e && e.message !== undefined ? e.message : e);
    return JSON.stringify({ ok: false, error: { type, message, stack: String((e && e.stack) || "") }, logs });
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}

// warmup is the deploy's one call before the snapshot: the invocation
// path run through once without the handler (never called here), so what
// V8 and Node do lazily on a first use (compiling these functions, the
// socket and JSON paths, stack traces) is done, and kept in the snapshot,
// instead of in every fresh invocation.
async function warmup(body) {
  context(body.context ?? {}).getRemainingTimeInMillis();
  console.log("warm-up");
  const e = new Error("warm-up");
  JSON.stringify({ ok: false, error: { type: e.constructor.name, message: e.message, stack: String(e.stack) }, logs: "" });
  return JSON.stringify({ ok: true, result: null, logs: "" });
}

const server = net.createServer((sock) => {
  let buf = "";
  let started = false;
  sock.setEncoding("utf8");
  sock.on("data", (d) => {
    buf += d;
    const i = buf.indexOf("\n");
    if (i < 0 || started) return;
    started = true;
    invoke(buf.slice(0, i)).then((reply) => sock.end(reply + "\n"));
  });
  sock.on("error", () => {});
});
server.listen(Number(portText), "127.0.0.1", () => fs.writeFileSync(path.join(state, "ready"), ""));
