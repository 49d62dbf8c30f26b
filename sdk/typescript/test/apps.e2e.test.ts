// App hosting end to end against a real server (scripts/with-server; an
// admin key, so the app may clone a repository on the server's disk): a
// static site in a local git repository is deployed, built in a microVM,
// released and served by Host header through the API port. Skipped without
// PANDASTACK_BASE_URL and PANDASTACK_API_KEY.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { PandaStack, ConflictError, NotFoundError } from "@pandastack/sdk";

const live = !!process.env["PANDASTACK_BASE_URL"] && !!process.env["PANDASTACK_API_KEY"];
const skip = live ? false : "needs a server: set PANDASTACK_BASE_URL and PANDASTACK_API_KEY (see scripts/with-server)";

const dirs: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function git(cwd: string, ...args: string[]): void {
  execFileSync("git", args, {
    cwd,
    stdio: "pipe",
    env: { ...process.env, GIT_AUTHOR_NAME: "sdk", GIT_AUTHOR_EMAIL: "sdk@localhost", GIT_COMMITTER_NAME: "sdk",
      GIT_COMMITTER_EMAIL: "sdk@localhost", GIT_CONFIG_NOSYSTEM: "1", HOME: cwd },
  });
}

/** GET path from the server with the app's Host header. */
function getApp(appUrl: string, path = "/"): Promise<{ status: number; body: string }> {
  const base = new URL(process.env["PANDASTACK_BASE_URL"]!);
  return new Promise((resolve, reject) => {
    const req = http.get({ host: base.hostname, port: base.port, path, headers: { host: new URL(appUrl).host }, timeout: 60_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => (body += c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("timed out")));
  });
}

test("apps: a static site deploys from git, serves by Host, logs, deletes", { skip, timeout: 15 * 60_000 }, async () => {
  const c = new PandaStack();
  const dir = mkdtempSync(join(tmpdir(), "ts-sdk-app-"));
  dirs.push(dir);
  const bare = join(dir, "site.git");
  const work = join(dir, "work");
  git(dir, "init", "--quiet", "--bare", "--initial-branch=main", bare);
  git(dir, "init", "--quiet", "--initial-branch=main", work);
  writeFileSync(join(work, "index.html"), "<h1>typescript sdk site</h1>\n");
  git(work, "add", "-A");
  git(work, "commit", "--quiet", "-m", "v1");
  git(work, "push", "--quiet", bare, "main");

  const name = "ts-sdk-" + Math.random().toString(36).slice(2, 8);
  const a = await c.apps.create({ name, gitUrl: bare, healthTimeoutSeconds: 60 });
  try {
    assert.deepEqual([a.name, a.gitUrl, a.branch, a.liveDeployId], [name, bare, "main", ""]);
    assert.match(a.webhookSecret ?? "", /^whsec_/);
    await assert.rejects(c.apps.create({ name, gitUrl: bare }), (e: unknown) => e instanceof ConflictError);
    assert.ok((await c.apps.list()).some((x) => x.name === name));

    const queued = await c.apps.deploy(name);
    assert.equal(queued.status, "queued");
    const d = await c.apps.wait(name, queued.id, { timeoutMs: 10 * 60_000 });
    assert.deepEqual([d.status, d.framework, d.commit?.length], ["live", "static", 40], d.log);
    assert.deepEqual(await getApp(a.url), { status: 200, body: "<h1>typescript sdk site</h1>\n" });
    assert.equal((await c.apps.get(name)).liveDeployId, d.id);
    assert.match(await c.apps.logs(name, d.id), /framework static/);
    // One release only: nothing to roll back to.
    await assert.rejects(c.apps.rollback(name), (e: unknown) => e instanceof ConflictError);
  } finally {
    await c.apps.delete(name);
  }
  await assert.rejects(c.apps.get(name), (e: unknown) => e instanceof NotFoundError);
});
