// PandaStack function shim for Node: imports the handler once (before the
// function's snapshot is taken), then serves invocations on a TCP port on
// the guest's loopback. ES modules (export async function handler) and
// CommonJS (exports.handler) both load.
// Usage: node shim.mjs DIR FILE FUNCTION PORT STATEDIR
import fs from "node:fs";
import http from "node:http";
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

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
    let logs = "";
    const out = process.stdout.write, err = process.stderr.write;
    process.stdout.write = process.stderr.write = (c, ...rest) => {
      logs += String(c);
      const cb = rest.find((r) => typeof r === "function");
      if (cb) cb();
      return true;
    };
    let reply;
    try {
      const result = await handler(body.event, context(body.context ?? {}));
      reply = JSON.stringify({ ok: true, result: result === undefined ? null : result, logs });
    } catch (e) {
      const type = (e && e.constructor && e.constructor.name) || "Error";
      reply = JSON.stringify({ ok: false, error: { type, message: String(e && e.message !== undefined ? e.message : e), stack: String((e && e.stack) || "") }, logs });
    } finally {
      process.stdout.write = out;
      process.stderr.write = err;
    }
    res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(reply) });
    res.end(reply);
  });
});
server.listen(Number(portText), "127.0.0.1", () => fs.writeFileSync(path.join(state, "ready"), ""));
