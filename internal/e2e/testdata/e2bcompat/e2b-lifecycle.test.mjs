// E2B's sandbox lifecycle through the stock `e2b` SDK, unchanged:
// lifecycle.onTimeout 'pause' (the sandbox is paused, not killed, when its
// timeout ends; Sandbox.connect resumes it whole) and lifecycle.autoResume
// (traffic to the paused sandbox resumes it). Run by internal/e2e
// TestE2BCompat with the environment of e2b.test.mjs.
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError, TimeoutError } from 'e2b'

const made = []
after(async () => {
  for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
})
const create = async (opts) => {
  const s = await Sandbox.create('base', opts)
  made.push(s)
  return s
}

// until polls fn until it returns a value that is not undefined.
const until = async (what, fn, ms = 180_000) => {
  const end = Date.now() + ms
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await new Promise((res) => setTimeout(res, 250))
  }
}
const paused = (id) => until(`${id} to be paused`, async () =>
  (await Sandbox.getInfo(id)).state === 'paused' ? true : undefined)

// A python process that keeps a counter in its memory and writes it out.
const counter = `python3 -c 'import time
n = 0
while True:
    n += 1
    open("/tmp/count.tmp", "w").write(str(n))
    __import__("os").replace("/tmp/count.tmp", "/tmp/count")
    time.sleep(0.1)'`
const count = async (s) => Number(await s.files.read('/tmp/count'))

test("onTimeout 'pause': paused at its timeout, resumed by connect with files and memory kept", async () => {
  const s = await create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause' } })
  assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: false })
  await s.files.write('/tmp/kept.txt', 'written before the pause')
  const h = await s.commands.run(counter, { background: true, timeoutMs: 0 })
  const before = await until('the counter', async () => (await s.files.exists('/tmp/count')) ? count(s) : undefined)
  await h.disconnect() // it runs on; this client stops following it

  await s.setTimeout(2_000) // its timeout ends in 2 s: paused, not killed
  await paused(s.sandboxId)
  assert.equal(await s.isRunning(), false)
  // No autoResume: its data plane is shut until it is resumed.
  await assert.rejects(s.files.read('/tmp/kept.txt'), (e) => e instanceof TimeoutError)
  assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused')

  const again = await Sandbox.connect(s.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  assert.equal(await again.files.read('/tmp/kept.txt'), 'written before the pause')
  // The same process runs on, its counter counting on from where it was.
  const ps = await again.commands.list()
  assert.ok(ps.some((p) => p.pid === h.pid), `pid ${h.pid} not in ${JSON.stringify(ps)}`)
  const resumed = await count(again)
  assert.ok(resumed >= before, `counter ${resumed} after the resume, ${before} before the pause`)
  await until('the counter to go on', async () => (await count(again)) > resumed ? true : undefined)
})

test('autoResume: traffic to a paused sandbox resumes it', async () => {
  const s = await create({ timeoutMs: 120_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true })
  await s.files.write('/tmp/kept.txt', 'kept')
  await s.setTimeout(2_000)
  await paused(s.sandboxId)
  assert.equal(await s.files.read('/tmp/kept.txt'), 'kept') // resumes it
  assert.equal((await s.getInfo()).state, 'running')
  assert.equal((await s.commands.run('echo awake')).stdout, 'awake\n')
})

test('a sandbox without onTimeout pause is killed at its timeout', async () => {
  const s = await create({ timeoutMs: 120_000 })
  assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'kill', autoResume: false })
  await s.setTimeout(1_000)
  const gone = await until('the sandbox to end', async () => {
    try {
      await Sandbox.getInfo(s.sandboxId)
      return undefined
    } catch (e) {
      return e
    }
  })
  assert.ok(gone instanceof NotFoundError, `getInfo after the timeout: ${gone}`)
})
