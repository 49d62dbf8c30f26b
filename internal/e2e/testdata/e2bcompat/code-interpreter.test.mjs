// The stock `@e2b/code-interpreter` SDK, unchanged, against a PandaStack
// server: run by internal/e2e TestE2BCodeInterpreter (environment as for
// e2b.test.mjs). Its default template, code-interpreter-v1, is PandaStack's
// code-interpreter.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { Sandbox } from '@e2b/code-interpreter'

let sbx

before(async () => { sbx = await Sandbox.create({ timeoutMs: 300_000 }) })
after(async () => { if (sbx) await sbx.kill().catch(() => {}) })

test('runCode: the last expression, streamed stdout, state kept between runs', async () => {
  const out = []
  const ex = await sbx.runCode('x = 40\nprint("hello")\nx + 2', { onStdout: (m) => out.push(m.line) })
  assert.equal(ex.text, '42')
  assert.equal(ex.logs.stdout.join(''), 'hello\n') // in the chunks Python wrote
  assert.equal(out.join(''), 'hello\n')
  assert.equal(ex.error, undefined)
  assert.ok(ex.executionCount >= 1)
  assert.equal((await sbx.runCode('x')).text, '40')
})

test('runCode: an exception is data, not a thrown error', async () => {
  const ex = await sbx.runCode('1/0')
  assert.equal(ex.error.name, 'ZeroDivisionError')
  assert.match(ex.error.traceback, /ZeroDivisionError/)
})

test('the code-interpreter sandbox runs commands too', async () => {
  assert.equal((await sbx.commands.run('python3 -c "print(6*7)"')).stdout, '42\n')
})

test('runCode: a matplotlib chart comes back as a PNG result', async () => {
  const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
  const chart = ex.results.find((r) => r.png)
  assert.ok(chart, `no PNG among ${JSON.stringify(ex.results.map((r) => r.formats()))}`)
  assert.equal(Buffer.from(chart.png, 'base64').subarray(1, 4).toString(), 'PNG')
})

test('code contexts: made in a directory, kept apart, restarted and removed', async () => {
  const ctx = await sbx.createCodeContext({ cwd: '/tmp' })
  assert.ok(ctx.id)
  assert.equal(ctx.cwd, '/tmp')
  assert.equal(ctx.language, 'python')
  const ex = await sbx.runCode('import os\nsecret = 7\nprint(os.getcwd())', { context: ctx })
  assert.equal(ex.logs.stdout.join(''), '/tmp\n')
  assert.equal((await sbx.runCode('secret', { context: ctx })).text, '7')
  assert.equal((await sbx.runCode('"secret" in dir()')).text, 'False') // the default context is another namespace
  assert.ok((await sbx.listCodeContexts()).some((c) => c.id === ctx.id && c.cwd === '/tmp'))
  await sbx.restartCodeContext(ctx)
  assert.equal((await sbx.runCode('secret', { context: ctx })).error.name, 'NameError')
  await sbx.removeCodeContext(ctx)
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === ctx.id))
  await assert.rejects(sbx.restartCodeContext(ctx), (e) => e.name === 'NotFoundError')
  await assert.rejects(sbx.createCodeContext({ language: 'r' }), /^SandboxError: 400/) // Python only
})

test('runCode: envs for one run, put back after it', async () => {
  const ex = await sbx.runCode('import os\nprint(os.environ.get("RUN_ONLY"))', { envs: { RUN_ONLY: 'yes' } })
  assert.equal(ex.logs.stdout.join(''), 'yes\n')
  assert.equal((await sbx.runCode('print(os.environ.get("RUN_ONLY"))')).logs.stdout.join(''), 'None\n')
})
