// The stock `e2b` SDK configured for production: E2B_DOMAIN only, so that
// the control plane is https://api.DOMAIN and each sandbox's envd is
// https://49983-ID.DOMAIN, both on the server's TLS (SNI) listener, its
// certificates issued by the server's own CA, which node trusts through
// NODE_EXTRA_CA_CERTS (set by the harness). Run by internal/e2e
// TestE2BCompat, which sets E2B_TLS_DOMAIN=localhost:TLSPORT; the names
// resolve to loopback through loopback-dns.mjs (the stand-in for DNS).
import { looked } from './loopback-dns.mjs'
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError } from 'e2b'

const domain = process.env.E2B_TLS_DOMAIN
if (!domain) throw new Error('E2B_TLS_DOMAIN is not set')
if (!process.env.NODE_EXTRA_CA_CERTS) throw new Error('NODE_EXTRA_CA_CERTS is not set')
// As a user in production configures it: the domain, no plain-http URLs.
delete process.env.E2B_API_URL
delete process.env.E2B_SANDBOX_URL
process.env.E2B_DOMAIN = domain
const host = domain.replace(/:\d+$/, '')

test('E2B_DOMAIN over TLS: create, run a command, write and read a file, kill', async () => {
  const s = await Sandbox.create('base', { timeoutMs: 120_000 })
  try {
    assert.equal((await s.commands.run('echo over-tls; echo $((6*7))')).stdout, 'over-tls\n42\n')
    await s.files.write('/tmp/tls.txt', 'sent over TLS')
    assert.equal(await s.files.read('/tmp/tls.txt'), 'sent over TLS')
    assert.deepEqual((await s.files.list('/tmp')).filter((e) => e.name === 'tls.txt').map((e) => e.path), ['/tmp/tls.txt'])
    assert.equal((await s.getInfo()).state, 'running')
    assert.equal(s.getHost(8080), `8080-${s.sandboxId}.${domain}`)
  } finally {
    assert.equal(await Sandbox.kill(s.sandboxId), true)
  }
  await assert.rejects(Sandbox.getInfo(s.sandboxId), (e) => e instanceof NotFoundError)
  // The SDK dialled the API and the sandbox's envd by their names.
  assert.ok(looked.includes(`api.${host}`), `looked up ${JSON.stringify(looked)}`)
  assert.ok(looked.includes(`49983-${s.sandboxId}.${host}`), `looked up ${JSON.stringify(looked)}`)
})
