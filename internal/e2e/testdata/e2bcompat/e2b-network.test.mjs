// E2B's network options and metrics through the stock `e2b` SDK, unchanged.
// Run by internal/e2e TestE2BCompat, which also sets E2B_TEST_OUTSIDE_URL:
// an HTTP server in a network namespace the test made, standing for the
// internet (never an outside address).
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const outside = process.env.E2B_TEST_OUTSIDE_URL
if (!outside) throw new Error('E2B_TEST_OUTSIDE_URL is not set')
const ip = new URL(outside).hostname
const made = []
after(async () => {
  for (const s of made) await Sandbox.kill(s.sandboxId).catch(() => {})
})
const create = async (opts) => {
  const s = await Sandbox.create('base', opts)
  made.push(s)
  return s
}
// The HTTP status curl got from the outside server, "000" when the
// connection was refused.
const reach = async (s) =>
  (await s.commands.run(`curl -s -o /dev/null -m 10 -w '%{http_code}' ${outside} || true`)).stdout

test('allowInternetAccess: false cuts egress, in force at the first command', async () => {
  const s = await create({ allowInternetAccess: false })
  assert.equal(await reach(s), '000')
})

test('denyOut everything but allowOut an address reaches that address', async () => {
  const s = await create({ network: { denyOut: ['0.0.0.0/0'], allowOut: [ip] } })
  assert.equal(await reach(s), '200')
  const other = await create({ network: { denyOut: ['0.0.0.0/0'], allowOut: ['192.0.2.1'] } })
  assert.equal(await reach(other), '000')
})

test('updateNetwork replaces a live sandbox\'s egress rules', async () => {
  const s = await create()
  assert.equal(await reach(s), '200')
  await s.updateNetwork({ denyOut: [ip] })
  assert.equal(await reach(s), '000')
  await s.updateNetwork({})
  assert.equal(await reach(s), '200')
})

test('what this server cannot express is a clear error, not a silent allow', async () => {
  await assert.rejects(create({ network: { denyOut: ['example.com'] } }), /denyOut entry "example.com" is a domain/)
})

test('getMetrics returns a sample taken in the guest', async () => {
  const s = await create()
  const ms = await s.getMetrics()
  assert.equal(ms.length, 1)
  const m = ms[0]
  assert.ok(m.cpuCount >= 1, `cpuCount ${m.cpuCount}`)
  assert.ok(m.memTotal > 64 << 20 && m.memUsed > 0 && m.memUsed < m.memTotal, `memory ${m.memUsed}/${m.memTotal}`)
  assert.ok(m.diskTotal > 0 && m.diskUsed > 0 && m.diskUsed < m.diskTotal, `disk ${m.diskUsed}/${m.diskTotal}`)
  assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, `cpu ${m.cpuUsedPct}`)
  assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 60_000)
  // A window that ended before now has no sample.
  assert.deepEqual(await s.getMetrics({ start: new Date(Date.now() - 3_600_000), end: new Date(Date.now() - 1_800_000) }), [])
})
