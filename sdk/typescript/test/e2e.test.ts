// End-to-end tests against a real PandaStack server with real microVMs.
// Run them with the repository's scripts/with-server, which exports
// PANDASTACK_BASE_URL and PANDASTACK_API_KEY (an admin key):
//
//   scripts/with-server sh -c 'cd sdk/typescript && npm ci && npm test'
//
// Without those variables the suite is skipped.

import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes, X509Certificate } from "node:crypto";

import {
  PandaStack,
  Sandbox,
  PandaStackError,
  AuthenticationError,
  PermissionDeniedError,
  InvalidArgumentError,
  NotFoundError,
  MethodNotAllowedError,
  ConflictError,
  GoneError,
  QuotaExceededError,
  RateLimitError,
  type ExecResult,
  type Snapshot,
} from "@pandastack/sdk";

const live = !!process.env["PANDASTACK_BASE_URL"] && !!process.env["PANDASTACK_API_KEY"];
const skip = live ? false : "needs a server: set PANDASTACK_BASE_URL and PANDASTACK_API_KEY (see scripts/with-server)";

// Every sandbox a test creates, killed at the end whatever happens.
const created: Sandbox[] = [];
after(async () => {
  await Promise.all(created.map((s) => s.kill().catch(() => {})));
});

function isTypedError(cls: Function, status: number) {
  return (e: unknown) => {
    assert.ok(e instanceof cls, `expected ${cls.name}, got ${(e as Error)?.constructor?.name}: ${(e as Error)?.message}`);
    assert.ok(e instanceof PandaStackError);
    assert.equal((e as PandaStackError).status, status);
    assert.ok((e as PandaStackError).message.length > 0);
    return true;
  };
}

describe("against a real server", { skip }, () => {
  // The sandbox of the README example, shared by the tests that follow it.
  let sandbox: Sandbox;
  let client: PandaStack;

  test("keys list/rotate/revoke; quotas hold forks to max_sandboxes; rate limits carry Retry-After", { timeout: 120_000 }, async () => {
    const admin = new PandaStack();
    const team = "ts-quota-" + randomBytes(4).toString("hex");
    const k = await admin.keys.create({ team, name: "ci" });
    assert.deepEqual((await admin.keys.list({ team })).map((x) => x.id), [k.id]);
    const c = new PandaStack({ apiKey: k.key });
    assert.deepEqual((await c.keys.list()).map((x) => x.id), [k.id]);

    const q = await admin.quotas.set(team, { maxSandboxes: 1 });
    assert.deepEqual([q.maxSandboxes, q.overridden], [1, ["max_sandboxes"]]);
    const sbx = await c.sandboxes.create({ template: "base", ttlSeconds: 120 });
    created.push(sbx);
    await assert.rejects(c.sandboxes.create({ template: "base", ttlSeconds: 60 }), (e: unknown) => {
      assert.ok(e instanceof QuotaExceededError, String(e));
      assert.equal(e.status, 429);
      assert.match(e.message, /max_sandboxes is 1/);
      return true;
    });
    await assert.rejects(sbx.fork(), isTypedError(QuotaExceededError, 429)); // a fork's child counts
    assert.equal((await c.quotas.get()).usage.sandboxes, 1);

    await admin.quotas.set(team, { maxSandboxes: null, requestsPerSecond: 0.01, burst: 1 });
    await c.keys.list();
    await assert.rejects(c.keys.list(), (e: unknown) => {
      assert.ok(e instanceof RateLimitError && !(e instanceof QuotaExceededError), String(e));
      assert.equal(e.retryAfterSeconds, 100);
      return true;
    });
    await admin.quotas.set(team, { requestsPerSecond: null, burst: null });

    const rotated = await admin.keys.rotate(k.id);
    await assert.rejects(c.keys.list(), isTypedError(AuthenticationError, 401));
    const c2 = new PandaStack({ apiKey: rotated.key });
    assert.equal((await c2.quotas.get()).team, team);
    await c2.keys.revoke(rotated.id);
    await assert.rejects(c2.quotas.get(), isTypedError(AuthenticationError, 401));
  });

  test("a volume's data outlives its sandbox; one in use is a ConflictError", { timeout: 120_000 }, async () => {
    const c = new PandaStack();
    const name = "ts-" + randomBytes(4).toString("hex");
    const vol = await c.volumes.create({ name, sizeMib: 32 });
    try {
      const a = await c.sandboxes.create({ template: "base", ttlSeconds: 300, volumes: [{ volume: name, path: "/data" }] });
      created.push(a);
      assert.deepEqual(a.info.volumes, [{ volume: vol.id, path: "/data" }]);
      await assert.rejects(c.sandboxes.create({ template: "base", ttlSeconds: 60, volumes: [{ volume: vol.id, path: "/x" }] }), isTypedError(ConflictError, 409));
      await assert.rejects(c.volumes.delete(name), isTypedError(ConflictError, 409));
      await a.filesystem.write("/data/kept.txt", "kept");
      await a.kill();
      const b = await c.sandboxes.create({ template: "base", ttlSeconds: 300, volumes: [{ volume: vol.id, path: "/mnt/v" }] });
      created.push(b);
      assert.equal(await b.filesystem.read("/mnt/v/kept.txt"), "kept");
      await b.kill();
      assert.equal((await c.volumes.get(name)).sandboxId, "");
    } finally {
      await c.volumes.delete(vol.id);
    }
  });

  test("the product's documented TypeScript example, line for line", { timeout: 120_000 }, async () => {
    const client = new PandaStack({ apiKey: process.env.PANDASTACK_API_KEY });
    const sandbox = await client.sandboxes.create({ template: "code-interpreter", ttlSeconds: 600 });
    created.push(sandbox);
    const result = await sandbox.exec("python -c 'print(2 ** 10)'", { timeoutSeconds: 30 });
    await sandbox.filesystem.write("/tmp/notes.txt", "hi"); const branch = await sandbox.fork();
    created.push(branch);
    assert.equal(result.stdout, "1024\n");
    assert.equal(await branch.filesystem.read("/tmp/notes.txt"), "hi");
    await branch.kill();
  });

  test("runCode: a live interpreter with state, plots and errors", { timeout: 300_000 }, async () => {
    const c = new PandaStack({ apiKey: process.env.PANDASTACK_API_KEY });
    const sbx = await c.sandboxes.create({ template: "code-interpreter", ttlSeconds: 600 });
    created.push(sbx);
    const first = await sbx.runCode("n = 20\nprint('ok')\nn + 1");
    assert.equal(first.text, "21");
    assert.deepEqual(first.logs.stdout, ["ok", "\n"]);
    assert.equal((await sbx.runCode("n * 2")).text, "40");
    const plot = await sbx.runCode("import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2), dpi=100)\nplt.plot([1, 2])");
    const png = plot.results.find((r) => r.png)?.png;
    assert.ok(png, "no PNG result");
    const bytes = Buffer.from(png, "base64");
    assert.equal(bytes.readUInt32BE(16), 200);
    assert.equal(bytes.readUInt32BE(20), 200);
    const err = await sbx.runCode("int('x')");
    assert.equal(err.error?.name, "ValueError");
    assert.match(err.error?.traceback ?? "", /int\('x'\)/);
    await assert.rejects(sbx.runCode("1", { language: "perl" }), isTypedError(InvalidArgumentError, 400));
  });

  test("the README example, verbatim", { timeout: 90_000 }, async () => {
    client = new PandaStack({ apiKey: process.env.PANDASTACK_API_KEY });
    sandbox = await client.sandboxes.create({ template: "base", ttlSeconds: 600, metadata: { task: "x" }, env: { A: "1" } });
    created.push(sandbox);
    assert.equal(sandbox.state, "running");
    assert.ok(sandbox.id);
    assert.ok(sandbox.accel === "kvm" || sandbox.accel === "tcg");
    assert.deepEqual(sandbox.metadata, { task: "x" });

    const result = await sandbox.exec("python3 -c 'print(2 ** 10)'", { timeoutSeconds: 30 });
    assert.equal(result.stdout, "1024\n");
    assert.deepEqual(result.stdoutBytes, new TextEncoder().encode("1024\n"));
    assert.equal(result.stderr, "");
    assert.equal(result.exitCode, 0);
    assert.equal(result.timedOut, false);
    assert.equal(result.signal, "");
    assert.ok(result.pid > 0);
    assert.ok(result.durationMs > 0);

    const out: string[] = [];
    const err: string[] = [];
    const r2 = await sandbox.exec("for i in 1 2 3; do echo $i; sleep 1; done; echo \"$A $B $(pwd) $(id -un)\" >&2", {
      onStdout: (s) => out.push(s),
      onStderr: (s) => err.push(s),
      env: { B: "2" },
      cwd: "/tmp",
      user: "root",
    });
    assert.equal(out.join(""), "1\n2\n3\n");
    assert.equal(err.join(""), "1 2 /tmp root\n");
    assert.equal(r2.stderr, "1 2 /tmp root\n");

    const r3 = await sandbox.exec("echo", { args: ["a b", "$HOME"] });
    assert.equal(r3.stdout, "a b $HOME\n");
    const r4 = await sandbox.exec("cat; exit 3", { stdin: "from stdin" });
    assert.equal(r4.stdout, "from stdin");
    assert.equal(r4.exitCode, 3);

    const info = await sandbox.filesystem.write("/tmp/notes.txt", "hi");
    assert.equal(info.size, 2);
    assert.equal(await sandbox.filesystem.read("/tmp/notes.txt"), "hi");
    assert.deepEqual(await sandbox.filesystem.readBytes("/tmp/notes.txt"), new TextEncoder().encode("hi"));

    const p = await sandbox.exec("sleep 100", { background: true });
    assert.ok(p.pid > 0);
    const procs = await sandbox.processes();
    assert.ok(procs.some((x) => x.pid === p.pid && x.running && x.background));
    await sandbox.signal(p.pid, "TERM");
    const ended = await sandbox.attach(p.pid, { onStdout: () => {} });
    assert.ok(ended.signal === "SIGTERM" || ended.exitCode === 143, JSON.stringify(ended));

    const before = sandbox.expiresAt.getTime();
    await sandbox.setTtl(600);
    assert.ok(sandbox.expiresAt.getTime() >= before);
    await sandbox.refresh();
    assert.equal(sandbox.state, "running");

    const got = await client.sandboxes.get(sandbox.id);
    assert.equal(got.id, sandbox.id);
    const listed = await client.sandboxes.list({ metadata: { task: "x" } });
    assert.ok(listed.some((s) => s.id === sandbox.id));
    assert.equal((await client.sandboxes.list({ metadata: { task: "no-such-task" } })).length, 0);
  });

  test("timeouts are results, not errors", { timeout: 30_000 }, async () => {
    const r = await sandbox.exec("sleep 10", { timeoutSeconds: 1 });
    assert.equal(r.timedOut, true);
    assert.equal(r.exitCode, 137);
  });

  test("streaming: output arrives while the command runs", { timeout: 30_000 }, async () => {
    const t0 = Date.now();
    const seen: Array<{ text: string; at: number }> = [];
    const r = await sandbox.exec("for i in 1 2 3 4; do echo line$i; sleep 1; done", {
      onStdout: (text) => seen.push({ text, at: Date.now() - t0 }),
    });
    const total = Date.now() - t0;
    assert.equal(r.stdout, "line1\nline2\nline3\nline4\n");
    assert.equal(seen.map((s) => s.text).join(""), r.stdout);
    const first = seen[0]!.at;
    const third = seen.find((s) => s.text.includes("line3"))!.at;
    // The command takes 4 s; its first line must come long before its end.
    assert.ok(total >= 3500, `total ${total} ms`);
    assert.ok(first <= total - 2500, `first output at ${first} ms, end at ${total} ms`);
    assert.ok(third - first >= 1500, `line3 at ${third} ms, line1 at ${first} ms`);
  });

  test("a 100 MB file round trip, streamed both ways, by checksum", { timeout: 150_000 }, async () => {
    const total = 100 * 1024 * 1024;
    const chunk = 1024 * 1024;
    const up = createHash("sha256");
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        if (sent >= total) return c.close();
        const b = new Uint8Array(randomBytes(chunk));
        up.update(b);
        sent += b.length;
        c.enqueue(b);
      },
    });
    const t0 = Date.now();
    const info = await sandbox.filesystem.write("/tmp/big.bin", body, { mode: 0o600 });
    const tUp = Date.now() - t0;
    const want = up.digest("hex");
    assert.equal(info.size, total);
    assert.equal(info.mode, 0o600);
    const st = await sandbox.filesystem.stat("/tmp/big.bin");
    assert.equal(st.size, total);

    const t1 = Date.now();
    const stream = await sandbox.filesystem.readStream("/tmp/big.bin");
    const down = createHash("sha256");
    let got = 0;
    for await (const part of stream as unknown as AsyncIterable<Uint8Array>) {
      down.update(part);
      got += part.length;
    }
    const tDown = Date.now() - t1;
    assert.equal(got, total);
    assert.equal(down.digest("hex"), want);

    const inGuest = await sandbox.exec("sha256sum /tmp/big.bin && rm /tmp/big.bin", { timeoutSeconds: 120 });
    assert.equal(inGuest.exitCode, 0, inGuest.stderr);
    assert.equal(inGuest.stdout.split(" ")[0], want);
    console.log(`# 100 MB: upload ${tUp} ms, download ${tDown} ms`);
  });

  test("background + attach + signal", { timeout: 60_000 }, async () => {
    const p = await sandbox.exec(
      "trap 'echo got-term; exit 7' TERM; echo started; echo err >&2; while true; do sleep 0.2; done",
      { background: true },
    );
    let sawStart!: () => void;
    const started = new Promise<void>((r) => (sawStart = r));
    const out: string[] = [];
    const errs: string[] = [];
    const attached: Promise<ExecResult> = p.attach({
      onStdout: (s) => {
        out.push(s);
        if (out.join("").includes("started")) sawStart();
      },
      onStderr: (s) => errs.push(s),
    });
    await started;
    const running = (await sandbox.processes()).find((x) => x.pid === p.pid);
    assert.ok(running?.running, JSON.stringify(running));
    assert.equal(running.background, true);
    await p.signal("TERM");
    const r = await attached;
    assert.equal(r.exitCode, 7);
    assert.equal(r.pid, p.pid);
    assert.equal(out.join(""), "started\ngot-term\n");
    assert.equal(r.stdout, "started\ngot-term\n");
    // (The shell may also report the killed sleep on stderr.)
    assert.ok(errs.join("").startsWith("err\n"), JSON.stringify(errs));
    assert.equal(r.stderr, errs.join(""));
    // Attaching again replays the output of the finished process.
    const again = await sandbox.attach(p.pid);
    assert.equal(again.exitCode, 7);
    const done = (await sandbox.processes()).find((x) => x.pid === p.pid);
    assert.equal(done?.running, false);
    assert.equal(done?.exitCode, 7);
    await assert.rejects(sandbox.signal(999999, "TERM"), PandaStackError);
  });

  test("filesystem operations", { timeout: 60_000 }, async () => {
    const fs = sandbox.filesystem;
    await fs.makeDir("/tmp/d/sub");
    await fs.write("/tmp/d/sub/a.txt", new Uint8Array([0, 1, 2, 255]));
    await fs.write("/tmp/d/run.sh", "#!/bin/sh\necho ran\n", { mode: "0755" });
    assert.deepEqual(await fs.readBytes("/tmp/d/sub/a.txt"), new Uint8Array([0, 1, 2, 255]));
    // E2B's formats; text refuses bytes that are not UTF-8 rather than altering them.
    assert.deepEqual(await fs.read("/tmp/d/sub/a.txt", { format: "bytes" }), new Uint8Array([0, 1, 2, 255]));
    const blob = await fs.read("/tmp/d/sub/a.txt", { format: "blob" });
    assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), new Uint8Array([0, 1, 2, 255]));
    const chunks: number[] = [];
    for await (const c of await fs.read("/tmp/d/sub/a.txt", { format: "stream" })) chunks.push(...c);
    assert.deepEqual(chunks, [0, 1, 2, 255]);
    await assert.rejects(fs.read("/tmp/d/sub/a.txt"), TypeError);
    assert.equal((await sandbox.exec("/tmp/d/run.sh")).stdout, "ran\n");
    const names = (await fs.list("/tmp/d")).map((e) => `${e.name}:${e.isDir}`);
    assert.deepEqual(names, ["run.sh:false", "sub:true"]);
    assert.equal((await fs.stat("/tmp/d/run.sh")).mode, 0o755);
    assert.equal(await fs.exists("/tmp/d/sub/a.txt"), true);
    assert.equal(await fs.exists("/tmp/d/nope"), false);
    await fs.rename("/tmp/d/sub/a.txt", "/tmp/d/b.bin");
    assert.equal(await fs.exists("/tmp/d/b.bin"), true);
    await assert.rejects(fs.read("/tmp/d/missing"), isTypedError(NotFoundError, 404));
    await assert.rejects(fs.remove("/tmp/d"), isTypedError(ConflictError, 409));
    await assert.rejects(fs.read("relative/path"), isTypedError(InvalidArgumentError, 400));
    await fs.remove("/tmp/d", { recursive: true });
    assert.equal(await fs.exists("/tmp/d"), false);
  });

  test("errors: bad key, unknown template, negative ttl, team key on admin route", { timeout: 60_000 }, async () => {
    const bad = new PandaStack({ apiKey: "pds_not_a_real_key" });
    await assert.rejects(bad.sandboxes.list(), isTypedError(AuthenticationError, 401));
    const none = new PandaStack({ apiKey: "" });
    await assert.rejects(none.sandboxes.list(), isTypedError(AuthenticationError, 401));
    // Health needs no key.
    assert.equal((await bad.health()).status, "ok");

    await assert.rejects(client.sandboxes.create({ template: "no-such-template" }), isTypedError(NotFoundError, 404));
    await assert.rejects(client.sandboxes.create({ template: "base", ttlSeconds: -5 }), isTypedError(InvalidArgumentError, 400));
    await assert.rejects(sandbox.setTtl(-1), isTypedError(InvalidArgumentError, 400));
    await assert.rejects(client.sandboxes.get("sb_does_not_exist"), isTypedError(NotFoundError, 404));

    const key = await client.keys.create({ team: "t1" });
    assert.match(key.key, /^pds_/);
    assert.equal(key.team, "t1");
    assert.equal(key.admin, false);
    const team = new PandaStack({ apiKey: key.key });
    await assert.rejects(team.keys.create({ team: "t2" }), isTypedError(PermissionDeniedError, 403));
    // Another team's sandbox answers 404, exactly like one that does not exist.
    await assert.rejects(team.sandboxes.get(sandbox.id), isTypedError(NotFoundError, 404));
    assert.equal((await team.sandboxes.list()).length, 0);
    assert.ok((await team.templates.list()).some((t) => t.name === "base"));
  });

  test("fork/snapshot need a newer server (typed errors until then); hibernate and wake work", { timeout: 60_000 }, async () => {
    try {
      const branch = await sandbox.fork();
      created.push(branch);
      assert.ok(branch.id && branch.id !== sandbox.id);
      assert.equal(branch.metadata["forked_from"], sandbox.id);
      await branch.kill(); // it inherits the parent's metadata: keep the list test exact
    } catch (e) {
      assert.ok(e instanceof NotFoundError || e instanceof MethodNotAllowedError, String(e));
    }
    try {
      await sandbox.snapshot();
    } catch (e) {
      assert.ok(e instanceof NotFoundError || e instanceof MethodNotAllowedError, String(e));
    }
    await sandbox.filesystem.write("/tmp/in-memory.txt", "kept");
    await sandbox.hibernate();
    await sandbox.refresh();
    assert.equal(sandbox.state, "hibernated");
    assert.equal((await sandbox.exec("cat /tmp/in-memory.txt")).stdout, "kept"); // wakes it
    await sandbox.hibernate();
    await sandbox.wake();
    await sandbox.refresh();
    assert.equal(sandbox.state, "running");
    await sandbox.refresh();
    assert.equal(sandbox.isLive, true);
  });

  test("Sandbox.create uses the environment; exec after kill is GoneError", { timeout: 90_000 }, async () => {
    const s2 = await Sandbox.create({ template: "base" });
    created.push(s2);
    assert.equal(s2.client.baseUrl, process.env["PANDASTACK_BASE_URL"]!.replace(/\/+$/, ""));
    assert.equal((await s2.exec("echo ok")).stdout, "ok\n");
    assert.equal((await s2.ping()).rttMs >= 0, true);
    await s2.kill();
    await s2.kill(); // idempotent
    await assert.rejects(s2.exec("echo too late"), isTypedError(GoneError, 410));
    await assert.rejects(s2.filesystem.read("/tmp/x"), isTypedError(GoneError, 410));
    await s2.refresh();
    assert.equal(s2.state, "killed");
    assert.equal(s2.isLive, false);
    assert.ok(s2.endedAt instanceof Date);
    const all = await new PandaStack().sandboxes.list({ state: "all" });
    assert.ok(all.some((s) => s.id === s2.id && s.state === "killed"));
  });

  test("kill the example's sandbox", { timeout: 30_000 }, async () => {
    await sandbox.kill();
    assert.equal((await client.sandboxes.get(sandbox.id)).state, "killed");
    assert.equal((await client.sandboxes.list({ metadata: { task: "x" } })).length, 0);
  });

  test("a custom template from a spec and files", { timeout: 300_000 }, async () => {
    const admin = new PandaStack({ apiKey: process.env.PANDASTACK_API_KEY });
    const name = "ts-" + Math.random().toString(16).slice(2, 10);
    const lines: string[] = [];
    const t = await admin.templates.buildCustom(name, {
      spec: "FROM base\nENV WHO=typescript\nWORKDIR /app\nCOPY data/hello.txt hello.txt\n",
      files: { "data/hello.txt": "hello from ts\n" },
      onLog: (l) => lines.push(l),
    });
    assert.equal(t.name, name);
    assert.ok(lines.some((l) => l.includes("COPY data/hello.txt hello.txt")), lines.join("\n"));
    assert.deepEqual((await admin.templates.versions(name)).map((v) => v.version), [1]);
    const sbx = await admin.sandboxes.create({ template: name, ttlSeconds: 120 });
    try {
      const r = await sbx.exec("echo $WHO; cat hello.txt");
      assert.equal(r.stdout, "typescript\nhello from ts\n");
    } finally {
      await sbx.kill();
    }
    await assert.rejects(admin.templates.buildCustom(name, { spec: "FROM base\nFROB x\n" }), /line 2/);
  });
});

describe("snapshots, the CA and team builds against a real server", { skip }, () => {
  test("a snapshot exported to object storage and imported back", { timeout: 300_000 }, async () => {
    const admin = new PandaStack();
    const sbx = await admin.sandboxes.create({ template: "base", ttlSeconds: 300 });
    created.push(sbx);
    await sbx.filesystem.write("/root/exported.txt", "round trip");
    const snapId = (await sbx.snapshot()).id;
    await sbx.kill();

    const exp: Snapshot = await admin.snapshots.export(snapId);
    assert.equal(exp.id, snapId);
    assert.match(exp.objectKey ?? "", /\S/);
    assert.ok(exp.exportedAt instanceof Date && !isNaN(exp.exportedAt.getTime()));
    assert.ok(exp.createdAt instanceof Date && exp.sizeBytes > 0);
    assert.equal(exp.exportError, undefined);
    // An exported snapshot answers at once, with the same key.
    assert.equal((await admin.snapshots.export(snapId)).objectKey, exp.objectKey);
    // The exported name is taken on this server.
    await assert.rejects(admin.snapshots.import(exp.objectKey!), isTypedError(ConflictError, 409));

    const name = "ts-imported-" + randomBytes(4).toString("hex");
    const imp = await admin.snapshots.import(exp.objectKey!, { name });
    assert.notEqual(imp.id, snapId); // this server has a snapshot with the exported id
    assert.deepEqual(
      [imp.name, imp.template, imp.sandboxId, imp.teamId],
      [name, exp.template, exp.sandboxId, exp.teamId],
    );
    const restored = await admin.sandboxes.create({ snapshot: imp.id, ttlSeconds: 300 });
    created.push(restored);
    assert.equal(await restored.filesystem.read("/root/exported.txt"), "round trip");
    await restored.kill();

    await assert.rejects(admin.snapshots.export("snap_doesnotexist"), isTypedError(NotFoundError, 404));
    await assert.rejects(admin.snapshots.import("snapshots/snap_doesnotexist"), isTypedError(NotFoundError, 404));
    const k = await admin.keys.create({ team: "ts-snap-" + randomBytes(4).toString("hex") });
    const team = new PandaStack({ apiKey: k.key });
    // Another team's snapshot and export look missing.
    await assert.rejects(team.snapshots.export(snapId), isTypedError(NotFoundError, 404));
    await assert.rejects(team.snapshots.import(exp.objectKey!), isTypedError(NotFoundError, 404));
  });

  test("the server's CA certificate parses as an X.509 CA; no key needed", { timeout: 30_000 }, async () => {
    const pem = await new PandaStack({ apiKey: "pds_not_a_real_key" }).caCertificate();
    assert.match(pem, /^-----BEGIN CERTIFICATE-----\n/);
    const cert = new X509Certificate(pem);
    assert.equal(cert.ca, true);
    assert.ok(cert.subject.length > 0);
    assert.ok(new Date(cert.validTo).getTime() > Date.now());
  });

  test("an admin key builds a custom template for a team; a team key only for its own", { timeout: 300_000 }, async () => {
    const admin = new PandaStack();
    const suffix = randomBytes(4).toString("hex");
    const k = await admin.keys.create({ team: "ts-build-" + suffix });
    const team = new PandaStack({ apiKey: k.key });
    const name = "ts-team-" + suffix;
    const spec = "FROM base\nENV WHO=team\n";
    // Refused before any build.
    await assert.rejects(admin.templates.buildCustom(name, { spec, team: "ts-no-such-team-" + suffix }), (e: unknown) => {
      isTypedError(NotFoundError, 404)(e);
      assert.match((e as Error).message, new RegExp("ts-no-such-team-" + suffix));
      return true;
    });
    await assert.rejects(team.templates.buildCustom(name, { spec, team: "admin" }), isTypedError(PermissionDeniedError, 403));

    const t = await admin.templates.buildCustom(name, { spec, team: k.team });
    assert.equal(t.name, name);
    assert.equal(t.teamId, k.teamId);
    assert.deepEqual((await team.templates.versions(name)).map((v) => v.version), [1]);
    // The team's template, not a public one.
    await assert.rejects(admin.templates.versions(name), isTypedError(NotFoundError, 404));
    const sbx = await team.sandboxes.create({ template: name, ttlSeconds: 120 });
    created.push(sbx);
    assert.equal((await sbx.exec("echo $WHO")).stdout, "team\n");
    await sbx.kill();
  });
});

describe("network against a real server", { skip }, () => {
  test("policy at create, denied connections fail fast, getHost, signed URLs", { timeout: 60_000 }, async () => {
    const client = new PandaStack();
    const sbx = await client.sandboxes.create({ template: "base", ttlSeconds: 300, network: { egress: "deny", publicPorts: [8000] } });
    created.push(sbx);
    assert.equal(sbx.network?.egress, "deny");
    assert.deepEqual(sbx.network?.publicPorts, [8000]);
    assert.equal(sbx.getHost(8000), `8000-${sbx.id}.${sbx.domain}`);
    const r = await sbx.exec("curl -sS -m 10 http://10.0.0.1:9/; echo rc=$?");
    assert.match(r.stdout, /rc=7/); // refused at once, not a timeout (28)
    assert.ok((await sbx.getNetwork()).deniedConnections >= 1);
    await assert.rejects(sbx.setNetwork({ allowDomains: ["a.*.com"] }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgumentError);
      assert.match((e as Error).message, /ambiguous wildcard/);
      return true;
    });
    const st = await sbx.setNetwork({ denyCidrs: ["10.0.0.0/8"] });
    assert.equal(st.egress, "allow");
    assert.deepEqual(sbx.network?.denyCidrs, ["10.0.0.0/8"]);
    const u = await sbx.signPortUrl(8000, { expiresInSeconds: 60 });
    assert.equal(u.host, sbx.getHost(8000));
    assert.match(u.url, /ps_token=/);
  });
});
