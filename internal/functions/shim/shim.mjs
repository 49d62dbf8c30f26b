// PandaStack function shim for Node: loads the handler once (before the
// function's snapshot is taken), then serves invocations, one JSON line
// each way ({"event", "context"} in; {"ok", "result" | "error", "logs"}
// out), on two ways in: the VM's direct port (a virtio-serial port of its
// own, read here: lines one after another, the host's fresh invocations),
// and a TCP port on the guest's loopback (one connection per invocation,
// through the guest agent: deploys, warm invocations, machines without a
// direct port).
// ES modules (export async function handler) and CommonJS
// (exports.handler) both load.
//
// Two ways to start:
//   node shim.mjs DIR FILE FUNCTION PORT STATEDIR   load, then serve
//   node shim.mjs --wait PORT STATEDIR              serve first, and load
//     the handler when a {"load": {"dir", "file", "function", "env",
//     "files"}} line asks (answered {"ok"} or {"ok": false, "error"}),
//     after writing files ([{path, mode, data (base64)}]) under dir: the
//     runtime base snapshot is taken while the shim waits so, and every
//     deploy restores it instead of starting Node (seconds under TCG).
import crypto from "node:crypto";
import fs from "node:fs";
import { syncBuiltinESMExports } from "node:module";
import net from "node:net";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

// Randomness. Every VM restored from one snapshot starts with the state its
// runtime had at the bake: V8's Math.random, and OpenSSL's generator, which
// crypto.randomBytes, randomFill(Sync), randomInt, randomUUID and
// getRandomValues draw from — OpenSSL reseeds only when minutes have passed
// since it last did, so the fresh invocations of a new function (and the
// functions on one runtime base) drew the same numbers and bytes. The guest
// agent reseeds the kernel's RNG at each restore; these read it instead.
// OpenSSL's own uses (key generation, primes, TLS handshakes) stay on its
// generators: the deploy leaves their last reseed hours in the past
// (functions.staleGenerators), so the first draw in a clone reseeds them
// from the kernel's RNG. That draw comes after the clock is the host's
// and the kernel's RNG reseeded (the hello's part, or the agent's hello
// and waitClock): OpenSSL checks a generator's age at each draw, a
// thread's generator asks the primary one for its seed, and the primary
// checks its own age first, so no draw in a clone is made from the
// snapshot's state. No draw is made here before a call: a handler that
// makes no key pays nothing (it cost a call 10-30 ms under TCG).
const opensslFill = crypto.randomFillSync; // OpenSSL's, before the override below
const one = Buffer.alloc(1);
// drawOpenSSL draws from OpenSSL's public and private generators (the
// latter by a key's generation): the deploy's, with the clock stepped back.
function drawOpenSSL() {
  opensslFill(one);
  crypto.generateKeyPairSync("ed25519");
}
const urandom = fs.openSync("/dev/urandom", "r");
// fill fills buf (an ArrayBuffer or a view of one) from the kernel's RNG:
// offset and size count its elements, as in crypto.randomFillSync.
function fill(buf, offset = 0, size) {
  const unit = buf.BYTES_PER_ELEMENT ?? 1;
  const start = offset * unit;
  const bytes = size === undefined ? buf.byteLength - start : size * unit;
  if (start < 0 || bytes < 0 || start + bytes > buf.byteLength) throw new RangeError("offset and size must lie within the buffer");
  const b = Buffer.from(buf.buffer ?? buf, (buf.byteOffset ?? 0) + start, bytes);
  for (let n = 0; n < bytes; ) n += fs.readSync(urandom, b, n, bytes - n, null);
  return buf;
}
function later(cb, make) {
  let v;
  try {
    v = make();
  } catch (e) {
    process.nextTick(cb, e);
    return;
  }
  process.nextTick(cb, null, v);
}
crypto.randomFillSync = (buf, offset = 0, size) => fill(buf, offset, size);
crypto.randomFill = (buf, offset, size, cb) => {
  if (typeof offset === "function") [cb, offset, size] = [offset, 0, undefined];
  else if (typeof size === "function") [cb, size] = [size, undefined];
  later(cb, () => fill(buf, offset ?? 0, size));
};
crypto.randomBytes = (size, cb) => {
  const make = () => fill(Buffer.alloc(size));
  if (typeof cb === "function") return void later(cb, make);
  return make();
};
crypto.randomUUID = () => {
  const b = fill(Buffer.alloc(16));
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = b.toString("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
};
crypto.randomInt = (min, max, cb) => {
  if (typeof max !== "number") [cb, max, min] = [max, min, 0];
  if (!Number.isSafeInteger(min) || !Number.isSafeInteger(max) || max <= min || max - min > 2 ** 48) {
    throw new RangeError(`randomInt: need safe integers min < max with max - min <= 2**48, got ${min}, ${max}`);
  }
  const make = () => {
    const range = max - min, limit = 2 ** 48 - (2 ** 48 % range), b = Buffer.alloc(6);
    let x;
    do x = fill(b).readUIntBE(0, 6);
    while (x >= limit);
    return min + (x % range);
  };
  if (typeof cb === "function") return void later(cb, make);
  return make();
};
if (globalThis.crypto) { // Web Crypto (node:crypto's getRandomValues is a fixed getter onto it)
  Object.defineProperty(globalThis.crypto, "getRandomValues", { value: (ta) => fill(ta), configurable: true, writable: true });
  Object.defineProperty(globalThis.crypto, "randomUUID", { value: crypto.randomUUID, configurable: true, writable: true });
}
syncBuiltinESMExports(); // `import { randomBytes } from "node:crypto"` sees these too
const bits = new Uint32Array(2);
Math.random = function random() {
  fill(bits);
  return ((bits[0] >>> 5) * 67108864 + (bits[1] >>> 6)) / 9007199254740992; // 53 bits, as V8's
};

class LoadError extends Error {}

// load imports FILE from dir and returns its FUNCTION, or throws a
// LoadError saying why not.
async function load(dir, file, func, env) {
  Object.assign(process.env, env ?? {});
  const found = [".mjs", ".js", ".cjs"].map((ext) => path.join(dir, file + ext)).find((p) => fs.existsSync(p));
  if (!found) throw new LoadError(`handler file ${file}.js (or .mjs, .cjs) not found in the bundle`);
  process.chdir(dir);
  let mod;
  try {
    mod = await import(pathToFileURL(found).href);
  } catch (e) {
    throw new LoadError(e && e.stack ? String(e.stack) : String(e));
  }
  const h = mod[func] ?? mod.default?.[func];
  if (typeof h !== "function") throw new LoadError(`${path.basename(found)} exports no function ${func}`);
  return h;
}

// The hello's part (functions/hello.go): a fresh invocation's line may
// come as "hello " and the call with a seed, a generation token and the
// host's time; the shim then does what the guest agent's hello does after
// a restore, before the handler runs. Node has no ioctl or clock_settime:
// hello.node (functions/shim/hello.c, a Node-API addon) has. Loaded, like
// the files below, before the snapshot; a server without the addon sends
// no such lines to Node, and an old or unprivileged shim answers them
// "not seeded" (the host has the agent do it).
const HELLO = "hello ";
const PONG = JSON.stringify({ ok: true, result: "pong", logs: "" });
const GENERATION = "/run/pandastack/generation";
let native = null;
try {
  const m = { exports: {} };
  process.dlopen(m, path.join(path.dirname(fileURLToPath(import.meta.url)), "hello.node"));
  native = m.exports;
} catch {
  // none here: the agent's hello does it
}
let generation = null; // opened now: under TCG an open is kernel code run for the first time
try {
  generation = fs.openSync(GENERATION, fs.constants.O_WRONLY);
} catch {
  // none to publish (the agent makes it at its first hello)
}

// hello mixes the host's seed into the kernel's RNG and has it reseed,
// sets the clock to the host's and publishes the host's new generation
// token; it throws when any of it fails (the call must not run then).
function hello(h) {
  if (native === null) throw new Error("no hello addon in this shim");
  const seed = Buffer.from(String(h.seed ?? ""), "hex");
  const ns = Number(h.now_ns);
  const sec = Math.floor(ns / 1e9);
  const rc = native.hello(urandom, seed, sec, Math.min(999999999, Math.max(0, Math.round(ns - sec * 1e9))));
  if (rc !== 0) throw new Error(rc === -1 ? "EPERM: the shim is not root" : `errno ${-rc}`);
  if (generation !== null) fs.writeSync(generation, String(h.generation) + "\n", 0);
}

// directCall answers a line from the direct port: a call, or a call with
// the hello's part, whose reply says "seeded" when the part was done and
// the call ran (without it the call did not run).
async function directCall(line) {
  if (line === "ping") return PONG; // the bench's floor (hostbench, shim floor): answered first of all
  if (!line.startsWith(HELLO)) return invoke(line);
  let req;
  try {
    req = JSON.parse(line.slice(HELLO.length));
    hello(req);
  } catch (e) {
    const error = { type: (e && e.constructor && e.constructor.name) || "Error", message: `the shim could not do the hello's part: ${e && e.message}`, stack: "" };
    return JSON.stringify({ ok: false, seeded: false, error, logs: "" });
  }
  return invoke(null, req);
}

const DIRECT_PORT = "pandastack.direct";

// openDirect opens the VM's direct port: null when its machine has none;
// it throws when there is one that will not open, since the host calls a
// function on the port its machine has.
function openDirect() {
  const base = "/sys/class/virtio-ports";
  let names;
  try {
    names = fs.readdirSync(base);
  } catch {
    return null;
  }
  for (const n of names) {
    let name;
    try {
      name = fs.readFileSync(path.join(base, n, "name"), "utf8").trim();
    } catch {
      continue;
    }
    if (name === DIRECT_PORT) return fs.openSync("/dev/" + n, "r+");
  }
  return null;
}

// serveDirect answers the lines the host writes on the direct port, one
// after another. The read waits in libuv's thread pool (a character
// device has no readiness to poll); a read while no host holds the port
// ends at once, and the next waits a pause that doubles from 2 ms to
// 100 ms.
function serveDirect(fd) {
  const chunk = Buffer.alloc(1 << 16);
  let pending = []; // a line's parts read so far (an event is up to 6 MiB; a read, one 4 KiB buffer)
  let pause = 2;
  const next = () =>
    fs.read(fd, chunk, 0, chunk.length, null, async (err, n) => {
      if (err || n === 0) {
        pending = [];
        setTimeout(next, pause);
        pause = Math.min(2 * pause, 100);
        return;
      }
      pause = 2;
      let data = chunk.subarray(0, n);
      for (let i; (i = data.indexOf(10)) >= 0; data = data.subarray(i + 1)) {
        pending.push(data.subarray(0, i));
        const line = Buffer.concat(pending).toString("utf8");
        pending = [];
        const reply = Buffer.from((await directCall(line)) + "\n");
        try {
          for (let off = 0; off < reply.length; ) off += fs.writeSync(fd, reply, off);
        } catch {
          // the host is gone (its VM ends): the reply with it
        }
      }
      if (data.length) pending.push(Buffer.from(data)); // chunk is read into again
      next();
    });
  next();
}

// waitClock: a request on the direct port reaches the shim just after the
// agent answered the host's hello, and the agent steps the wall clock from
// the snapshot's time to the host's right after that answer: the handler
// must not see the old time. The host sends its time (nowMs); a clock more
// than a second behind it waits for the step (at most a second).
async function waitClock(nowMs) {
  for (let i = 0; nowMs && i < 1000 && Date.now() < nowMs - 1000; i++) await new Promise((r) => setTimeout(r, 1));
}

let handler;
let port, state;
if (process.argv[2] === "--wait") {
  [port, state] = [Number(process.argv[3]), process.argv[4]];
} else {
  const [dir, file, func, portText, stateDir] = process.argv.slice(2);
  [port, state] = [Number(portText), stateDir];
  try {
    handler = await load(dir, file, func, null);
  } catch (e) {
    fs.writeFileSync(path.join(state, "error"), e instanceof LoadError ? e.message : String((e && e.stack) || e));
    process.exit(1);
  }
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

// invoke runs one call (line, or req already decoded from a hello line:
// its reply says "seeded") and returns its reply line.
async function invoke(line, req) {
  const seeded = req === undefined ? {} : { seeded: true };
  let logs = "";
  const out = process.stdout.write, err = process.stderr.write;
  process.stdout.write = process.stderr.write = (c, ...rest) => {
    logs += String(c);
    const cb = rest.find((r) => typeof r === "function");
    if (cb) cb();
    return true;
  };
  try {
    const body = req ?? JSON.parse(line);
    if (body.warmup) return warmup(body);
    if (body.load) return await loadRequest(body.load);
    if (body.openssl) {
      drawOpenSSL();
      return JSON.stringify({ ok: true, result: null, logs: "" });
    }
    if (!handler) throw new LoadError("no handler is loaded");
    await waitClock(body.now_ms);
    const result = await handler(body.event, context(body.context ?? {}));
    return JSON.stringify({ ok: true, result: result === undefined ? null : result, logs, ...seeded });
  } catch (e) {
    const type = (e && e.constructor && e.constructor.name) || "Error";
    const message = String(e && e.message !== undefined ? e.message : e);
    return JSON.stringify({ ok: false, error: { type, message, stack: String((e && e.stack) || "") }, logs, ...seeded });
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}

// unpack writes a bundle's files (paths relative and clean, checked by the
// server) under dir: no process to start for it.
function unpack(dir, files) {
  for (const f of files) {
    const p = path.join(dir, f.path);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, Buffer.from(f.data, "base64"), { mode: f.mode });
    fs.chmodSync(p, f.mode);
  }
}

// loadRequest answers a waiting shim's load line.
async function loadRequest(l) {
  if (handler) throw new LoadError("a handler is loaded already");
  try {
    unpack(l.dir, l.files ?? []);
    handler = await load(l.dir, l.file, l.function, l.env);
  } catch (e) {
    if (!(e instanceof LoadError)) throw e;
    return JSON.stringify({ ok: false, error: { type: "LoadError", message: e.message, stack: "" }, logs: "" });
  }
  return JSON.stringify({ ok: true, result: null, logs: "" });
}

// warmup is the bake's one call before the snapshot: the invocation
// path run through once without the handler (never called here), so what
// V8 and Node do lazily on a first use (compiling these functions, the
// socket and JSON paths, stack traces) is done, and kept in the snapshot,
// instead of in every fresh invocation.
async function warmup(body) {
  context(body.context ?? {}).getRemainingTimeInMillis();
  await directCall(HELLO + "{}"); // compiled, and the addon called: a seed of none is refused before any ioctl
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
let direct;
try {
  direct = openDirect();
} catch (e) {
  fs.writeFileSync(path.join(state, "error"), `the shim could not open the VM's direct port: ${e.message}`);
  process.exit(1);
}
if (direct !== null) serveDirect(direct);
server.listen(port, "127.0.0.1", () => fs.writeFileSync(path.join(state, "ready"), ""));
