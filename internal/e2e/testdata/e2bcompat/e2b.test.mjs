// The stock `e2b` SDK, unchanged, against a PandaStack server. Run by
// internal/e2e TestE2BCompat (which sets the environment below) or by hand:
//   E2B_API_KEY=e2b_... E2B_OTHER_KEY=e2b_... (another team's key)
//   E2B_API_URL=http://127.0.0.1:PORT E2B_SANDBOX_URL=http://127.0.0.1:PORT
//   E2B_DOMAIN=localhost:PORT npm test
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import http from 'node:http'
import crypto from 'node:crypto'
import {
  Sandbox, AuthenticationError, CommandExitError, NotFoundError, SandboxError,
} from 'e2b'

const env = (k) => {
  const v = process.env[k]
  if (!v) throw new Error(`${k} is not set`)
  return v
}
const server = env('E2B_SANDBOX_URL')
const otherKey = env('E2B_OTHER_KEY')
const run = `run${Date.now()}`

let sbx // the main sandbox: base template, shared by the tests in order
let second // a second one: pagination, pause/resume, kill

before(async () => {
  sbx = await Sandbox.create('base', { timeoutMs: 300_000, envs: { FOO: 'from-create' }, metadata: { suite: run, role: 'main' } })
  second = await Sandbox.create({ metadata: { suite: run, role: 'second' } })
})

after(async () => {
  for (const s of [sbx, second]) {
    if (s) await Sandbox.kill(s.sandboxId).catch(() => {})
  }
})

test('create returns an E2B-shaped sandbox id', () => {
  assert.match(sbx.sandboxId, /^[a-z0-9]+$/)
  assert.notEqual(sbx.sandboxId, second.sandboxId)
})

test('commands.run streams stdout and stderr through bash -l, with the sandbox env', async () => {
  const out = []
  const errs = []
  const r = await sbx.commands.run('echo {a,b}; [[ 1 == 1 ]] && echo bash; echo $FOO; echo oops >&2', {
    onStdout: (d) => out.push(d), onStderr: (d) => errs.push(d),
  })
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'a b\nbash\nfrom-create\n')
  assert.equal(r.stderr, 'oops\n')
  assert.equal(out.join(''), r.stdout)
  assert.equal(errs.join(''), 'oops\n')
})

test('commands.run: cwd, envs, user, and a failing command', async () => {
  const r = await sbx.commands.run('pwd; echo $X; whoami', { cwd: '/tmp', envs: { X: 'per-call' } })
  assert.equal(r.stdout, '/tmp\nper-call\nuser\n')
  const root = await sbx.commands.run('whoami', { user: 'root' })
  assert.equal(root.stdout, 'root\n')
  await assert.rejects(sbx.commands.run('echo before; exit 3'), (e) => {
    assert.ok(e instanceof CommandExitError, `got ${e}`)
    assert.equal(e.exitCode, 3)
    assert.equal(e.stdout, 'before\n')
    return true
  })
})

test('commands.run timeoutMs ends a long command', async () => {
  await assert.rejects(sbx.commands.run('sleep 60', { timeoutMs: 2_000 }))
})

test('background command: list, kill, wait', async () => {
  let started
  const seen = new Promise((resolve) => { started = resolve })
  const h = await sbx.commands.run('echo started; sleep 600', { background: true, onStdout: started })
  assert.ok(h.pid > 0)
  assert.equal(await seen, 'started\n') // output streams while it runs
  const ps = await sbx.commands.list()
  assert.ok(ps.some((p) => p.pid === h.pid), `pid ${h.pid} not in ${JSON.stringify(ps)}`)
  assert.equal(await h.kill(), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError)
  assert.equal(h.stdout, 'started\n')
  assert.equal(await sbx.commands.kill(999999), false)
})

test('stdin: sendStdin and closeStdin to a command started with stdin', async () => {
  const h = await sbx.commands.run('cat; echo done', { background: true, stdin: true })
  await sbx.commands.sendStdin(h.pid, 'hello ')
  await sbx.commands.sendStdin(h.pid, 'stdin\n')
  await sbx.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'hello stdin\ndone\n')
  await assert.rejects(sbx.commands.sendStdin(h.pid, 'late'))
})

test('files: write, read, list, exists, makeDir, rename, remove', async () => {
  const info = await sbx.files.write('/tmp/e2b/a.txt', 'hello')
  assert.equal(info.path, '/tmp/e2b/a.txt')
  assert.equal(await sbx.files.read('/tmp/e2b/a.txt'), 'hello')
  const bytes = await sbx.files.read('/tmp/e2b/a.txt', { format: 'bytes' })
  assert.deepEqual(Array.from(bytes), Array.from(Buffer.from('hello')))
  const many = await sbx.files.write([{ path: '/tmp/e2b/m1', data: 'one' }, { path: '/tmp/e2b/sub/m2', data: 'two' }])
  assert.deepEqual(many.map((w) => w.path).sort(), ['/tmp/e2b/m1', '/tmp/e2b/sub/m2'])
  assert.equal(await sbx.files.read('/tmp/e2b/sub/m2'), 'two')
  const names = (await sbx.files.list('/tmp/e2b')).map((e) => `${e.name}:${e.type}`).sort()
  assert.deepEqual(names, ['a.txt:file', 'm1:file', 'sub:dir'])
  assert.equal(await sbx.files.exists('/tmp/e2b/a.txt'), true)
  assert.equal(await sbx.files.exists('/tmp/e2b/nope'), false)
  assert.equal(await sbx.files.makeDir('/tmp/e2b/d/e'), true)
  assert.equal(await sbx.files.makeDir('/tmp/e2b/d/e'), false)
  const moved = await sbx.files.rename('/tmp/e2b/a.txt', '/tmp/e2b/d/b.txt')
  assert.equal(moved.path, '/tmp/e2b/d/b.txt')
  assert.equal((await sbx.files.getInfo('/tmp/e2b/d/b.txt')).size, 5)
  await sbx.files.remove('/tmp/e2b/d')
  assert.equal(await sbx.files.exists('/tmp/e2b/d/b.txt'), false)
  await assert.rejects(sbx.files.read('/tmp/e2b/missing'), (e) => e instanceof NotFoundError)
  // Files are written as the user (as by envd): the user's commands may
  // change them, and a path the user may not write is the guest's refusal.
  await sbx.files.write('/tmp/e2b/new/owned', 'x')
  assert.equal((await sbx.commands.run('echo y >> /tmp/e2b/new/owned; stat -c %U /tmp/e2b/new /tmp/e2b/new/owned')).stdout, 'user\nuser\n')
  await assert.rejects(sbx.files.write('/etc/e2b-denied', 'x'), (e) => {
    assert.ok(e instanceof SandboxError, `got ${e}`)
    assert.match(String(e.message), /Permission denied/)
    return true
  })
  await sbx.files.write('/etc/e2b-root', 'x', { user: 'root' })
  assert.equal(await sbx.files.read('/etc/e2b-root'), 'x')
  // Relative paths are under the user's home, as with E2B.
  await sbx.files.write('rel.txt', 'home')
  assert.equal((await sbx.commands.run('cat /home/user/rel.txt')).stdout, 'home')
})

test('getHost(port) reaches an HTTP server inside the sandbox', async () => {
  await sbx.files.write('/tmp/www/index.html', 'hello from the sandbox')
  await sbx.commands.run('cd /tmp/www && python3 -m http.server 8123 --bind 127.0.0.1', { background: true, timeoutMs: 0 })
  const host = sbx.getHost(8123)
  assert.equal(host, `8123-${sbx.sandboxId}.${env('E2B_DOMAIN')}`)
  const u = new URL(server)
  let body
  for (let i = 0; i < 100 && body === undefined; i++) {
    const r = await request(u, host, '/').catch(() => null)
    if (r && r.status === 200) body = r.body
    else await new Promise((res) => setTimeout(res, 300))
  }
  assert.equal(body, 'hello from the sandbox')
})

// A WebSocket echo server on Python's standard library (the base template
// has no WebSocket package): the handshake, then each text frame back
// with "echo:" in front.
const wsServer = `import base64, hashlib, socketserver, struct
G = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
class H(socketserver.StreamRequestHandler):
    def handle(self):
        key = b""
        while True:
            line = self.rfile.readline().strip()
            if not line:
                break
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"sec-websocket-key":
                key = v.strip()
        accept = base64.b64encode(hashlib.sha1(key + G).digest())
        self.wfile.write(b"HTTP/1.1 101 Switching Protocols\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Accept: " + accept + b"\\r\\n\\r\\n")
        while True:
            h = self.rfile.read(2)
            if len(h) < 2:
                return
            n = h[1] & 127
            if n == 126:
                n = struct.unpack(">H", self.rfile.read(2))[0]
            mask = self.rfile.read(4) if h[1] & 128 else bytes(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if h[0] & 15 == 8:
                return
            reply = b"echo:" + data
            self.wfile.write(bytes([0x81, len(reply)]) + reply)
            self.wfile.flush()
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer(("127.0.0.1", 8124), H).serve_forever()
`

test('getHost(port) carries a WebSocket to a server inside the sandbox', async () => {
  await sbx.files.write('/tmp/ws.py', wsServer)
  await sbx.commands.run('python3 /tmp/ws.py', { background: true, timeoutMs: 0 })
  const u = new URL(server)
  let got
  for (let i = 0; i < 100 && got === undefined; i++) {
    got = await wsEcho(u, sbx.getHost(8124), 'ping').catch(() => undefined)
    if (got === undefined) await new Promise((res) => setTimeout(res, 300))
  }
  assert.equal(got, 'echo:ping')
})

test('E2B_DOMAIN host routing: envd health, a signed download URL', async () => {
  const u = new URL(server)
  const envd = `49983-${sbx.sandboxId}.${env('E2B_DOMAIN')}`
  assert.equal((await request(u, envd, '/health')).status, 204)
  await sbx.files.write('/tmp/signed.txt', 'signed')
  const signed = new URL(await sbx.downloadUrl('/tmp/signed.txt'))
  assert.match(signed.search, /signature=v1_/)
  // Signed URLs carry no routing headers: they are fetched by host name.
  const r = await request(u, envd, signed.pathname + signed.search)
  assert.deepEqual([r.status, r.body], [200, 'signed'])
  const forged = signed.search.replace(/signature=[^&]+/, 'signature=v1_forged')
  assert.equal((await request(u, envd, signed.pathname + forged)).status, 401)
  assert.equal((await request(u, `49983-doesnotexist0.${env('E2B_DOMAIN')}`, '/health')).status, 502)
})

test('setTimeout and getInfo', async () => {
  await sbx.setTimeout(600_000)
  const info = await sbx.getInfo()
  assert.equal(info.sandboxId, sbx.sandboxId)
  assert.equal(info.state, 'running')
  assert.equal(info.metadata.suite, run)
  assert.ok(info.endAt.getTime() > Date.now() + 500_000, `endAt ${info.endAt.toISOString()}`)
})

test('Sandbox.connect and Sandbox.list with a metadata filter and pages', async () => {
  const again = await Sandbox.connect(sbx.sandboxId)
  assert.equal((await again.commands.run('echo again')).stdout, 'again\n')
  const all = await Sandbox.list({ query: { metadata: { suite: run } } }).nextItems()
  assert.deepEqual(all.map((s) => s.sandboxId).sort(), [sbx.sandboxId, second.sandboxId].sort())
  const one = await Sandbox.list({ query: { metadata: { suite: run, role: 'main' } } }).nextItems()
  assert.deepEqual(one.map((s) => s.sandboxId), [sbx.sandboxId])
  const pages = Sandbox.list({ query: { metadata: { suite: run } }, limit: 1 })
  const seen = []
  while (pages.hasNext) seen.push(...(await pages.nextItems()).map((s) => s.sandboxId))
  assert.deepEqual(seen.sort(), [sbx.sandboxId, second.sandboxId].sort())
})

test('pause and resume on connect', async () => {
  await second.files.write('/tmp/kept', 'state')
  assert.equal(await second.pause(), true)
  assert.equal((await second.getInfo()).state, 'paused')
  const resumed = await Sandbox.connect(second.sandboxId)
  assert.equal((await resumed.getInfo()).state, 'running')
  assert.equal(await resumed.files.read('/tmp/kept'), 'state')
})

test('a wrong key is 401, another team sees no sandbox', async () => {
  const wrong = 'e2b_' + '0'.repeat(40)
  await assert.rejects(Sandbox.create({ apiKey: wrong }), (e) => e instanceof AuthenticationError)
  await assert.rejects(Sandbox.list({ apiKey: wrong }).nextItems(), (e) => e instanceof AuthenticationError)
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, { apiKey: otherKey }), (e) => e instanceof NotFoundError)
  await assert.rejects(Sandbox.connect(sbx.sandboxId, { apiKey: otherKey }), (e) => e instanceof NotFoundError)
  assert.equal(await Sandbox.kill(sbx.sandboxId, { apiKey: otherKey }), false)
  assert.deepEqual(await Sandbox.list({ apiKey: otherKey, query: { metadata: { suite: run } } }).nextItems(), [])
})

test('envd: unknown sandbox 502 JSON, wrong access token 401, unsupported call named', async () => {
  const call = (id, token, path = '/process.Process/List') => fetch(server + path, {
    method: 'POST', body: '{}',
    headers: { 'Content-Type': 'application/json', 'Connect-Protocol-Version': '1', 'E2b-Sandbox-Id': id, 'E2b-Sandbox-Port': '49983', 'X-Access-Token': token },
  })
  let r = await call('doesnotexist0', 'x')
  assert.equal(r.status, 502)
  assert.equal((await r.json()).code, 502)
  r = await call(sbx.sandboxId, 'wrong')
  assert.equal(r.status, 401)
  assert.equal((await r.json()).code, 'unauthenticated')
  r = await call(sbx.sandboxId, sbx.envdAccessToken ?? '', '/process.Process/StreamInput')
  assert.equal(r.status, 501)
  const body = await r.json()
  assert.equal(body.code, 'unimplemented')
  assert.match(body.message, /process\.Process\/StreamInput/)
})

test('pty: create, sendInput, resize, kill', async () => {
  let out = ''
  const dec = new TextDecoder()
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d, { stream: true }) } })
  assert.ok(h.pid > 0)
  const until = async (s) => {
    for (let i = 0; i < 300 && !out.includes(s); i++) await new Promise((res) => setTimeout(res, 100))
    assert.ok(out.includes(s), `no ${JSON.stringify(s)} in ${JSON.stringify(out)}`)
  }
  const type = (s) => sbx.pty.sendInput(h.pid, new TextEncoder().encode(s))
  await type('tty; stty size; echo pty-$((6*7))\n')
  await until('pty-42')
  assert.match(out, /\/dev\/pts\/\d+/)
  assert.match(out, /24 80/)
  await sbx.pty.resize(h.pid, { cols: 120, rows: 40 })
  await type('stty size\n')
  await until('40 120')
  assert.equal(await sbx.pty.kill(h.pid), true)
  await assert.rejects(h.wait(), (e) => e instanceof CommandExitError)
  await assert.rejects(sbx.pty.sendInput(h.pid, new TextEncoder().encode('late')))
})

test('pty.connect: a pty whose handle was dropped is followed again by its pid', async () => {
  const dec = new TextDecoder()
  let first = ''
  const h = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { first += dec.decode(d, { stream: true }) } })
  const type = (s) => sbx.pty.sendInput(h.pid, new TextEncoder().encode(s))
  const wait = async (get, s) => {
    for (let i = 0; i < 300 && !get().includes(s); i++) await new Promise((res) => setTimeout(res, 100))
    assert.ok(get().includes(s), `no ${JSON.stringify(s)} in ${JSON.stringify(get())}`)
  }
  await type('X=kept-in-the-shell; echo one-$((20+1))\n')
  await wait(() => first, 'one-21')
  await h.disconnect() // the handle is dropped; the shell runs on
  let again = ''
  const h2 = await sbx.pty.connect(h.pid, { onData: (d) => { again += dec.decode(d, { stream: true }) } })
  assert.equal(h2.pid, h.pid)
  await type('echo two-$X\n') // the same shell: its variable is there
  await wait(() => again, 'two-kept-in-the-shell')
  assert.ok(!first.includes('two-kept'), 'the dropped handle still got output')
  assert.equal(await sbx.pty.kill(h.pid), true)
  await assert.rejects(h2.wait(), (e) => e instanceof CommandExitError)
  await assert.rejects(sbx.pty.connect(999999), (e) => e instanceof NotFoundError)
  await assert.rejects(sbx.commands.connect(999999), (e) => e instanceof NotFoundError)
})

test('files.watchDir reports creates, writes, renames and removes', async () => {
  await sbx.files.makeDir('/tmp/watched')
  const events = []
  const w = await sbx.files.watchDir('/tmp/watched', (e) => { events.push(`${e.type} ${e.name}`) }, { recursive: true, timeoutMs: 60_000 })
  const until = async (ev) => {
    for (let i = 0; i < 100 && !events.includes(ev); i++) await new Promise((res) => setTimeout(res, 200))
    assert.ok(events.includes(ev), `no "${ev}" in ${JSON.stringify(events)}`)
  }
  await sbx.files.write('/tmp/watched/sub/f.txt', 'a')
  await until('create sub/f.txt')
  await sbx.commands.run('echo more >> /tmp/watched/sub/f.txt')
  await until('write sub/f.txt')
  await sbx.files.rename('/tmp/watched/sub/f.txt', '/tmp/watched/sub/g.txt')
  await until('rename sub/f.txt')
  await until('create sub/g.txt')
  await sbx.files.remove('/tmp/watched/sub')
  await until('remove sub/g.txt')
  await w.stop()
})

test('kill', async () => {
  await second.kill()
  assert.equal(await Sandbox.kill(second.sandboxId), false)
  assert.equal(await second.isRunning(), false)
  await assert.rejects(Sandbox.getInfo(second.sandboxId), (e) => e instanceof NotFoundError)
  second = undefined
})

// wsEcho opens a WebSocket to host through the server at u (Host set as for
// request), sends text in one masked frame and resolves with the first
// frame that comes back.
function wsEcho(u, host, text) {
  return new Promise((resolve, reject) => {
    const key = crypto.randomBytes(16).toString('base64')
    const req = http.request({
      host: u.hostname, port: u.port, path: '/',
      headers: { Host: host, Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13' },
    })
    req.on('upgrade', (res, socket) => {
      const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64')
      if (res.headers['sec-websocket-accept'] !== accept) {
        socket.destroy()
        reject(new Error('wrong Sec-WebSocket-Accept'))
        return
      }
      const payload = Buffer.from(text)
      const mask = crypto.randomBytes(4)
      const masked = Buffer.from(payload.map((b, i) => b ^ mask[i % 4]))
      let buf = Buffer.alloc(0)
      socket.on('data', (d) => {
        buf = Buffer.concat([buf, d])
        const n = buf.length >= 2 ? buf[1] & 127 : -1
        if (n >= 0 && buf.length >= 2 + n) {
          resolve(buf.subarray(2, 2 + n).toString())
          socket.destroy()
        }
      })
      socket.on('error', reject)
      socket.write(Buffer.concat([Buffer.from([0x81, 0x80 | payload.length]), mask, masked]))
    })
    req.on('response', (res) => { res.resume(); reject(new Error(`status ${res.statusCode}`)) })
    req.on('error', reject)
    req.end()
  })
}

// request GETs path from the server at u with Host set to host (a name
// like getHost's, which this machine's resolver need not know), as a
// client given DNS would.
function request(u, host, path) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, headers: { Host: host } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c) => { body += c })
      res.on('end', () => resolve({ status: res.statusCode, body }))
    })
    req.on('error', reject)
    req.end()
  })
}
