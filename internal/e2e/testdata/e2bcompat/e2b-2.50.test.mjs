// An older stock `e2b` (2.50.0, pinned as the npm alias e2b-2-50): it
// creates with POST /sandboxes (2.51 uses /v2/sandboxes), always sends the
// timeout, and connects with POST /sandboxes/{id}/connect. Run by
// internal/e2e TestE2BCompat with the environment of e2b.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b-2-50'

test('e2b 2.50: create, connect, run, files, kill on the v1 paths', async () => {
  const sbx = await Sandbox.create('base', { metadata: { sdk: '2.50' } })
  try {
    assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
    const again = await Sandbox.connect(sbx.sandboxId)
    assert.equal((await again.commands.run('echo old-sdk')).stdout, 'old-sdk\n')
    await again.files.write('/tmp/old.txt', 'v1')
    assert.equal(await again.files.read('/tmp/old.txt'), 'v1')
  } finally {
    assert.equal(await Sandbox.kill(sbx.sandboxId), true)
  }
})
