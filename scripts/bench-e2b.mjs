// The cost of E2B compatibility, measured against a running server in one
// run: create + first command and a command round trip through the stock
// `e2b` SDK (unchanged) and through our own @pandastack/sdk, interleaved
// round by round so both sides see the same machine. Run by
// scripts/bench-e2b, which sets the environment and the module paths.
import { pathToFileURL } from 'node:url'

const { Sandbox } = await import(pathToFileURL(process.env.BENCH_E2B_MODULE).href)
const { PandaStack } = await import(pathToFileURL(process.env.BENCH_SDK_MODULE).href)
const rounds = Number(process.env.BENCH_ROUNDS || 20)
const cmds = Number(process.env.BENCH_COMMANDS || 10)
const ours = new PandaStack()

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6
const now = () => process.hrtime.bigint()
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]
}

async function e2bRound(out) {
  let t0 = now()
  const s = await Sandbox.create('base')
  try {
    const r = await s.commands.run('echo hi')
    out.create.push(ms(t0))
    if (r.stdout !== 'hi\n') throw new Error(`e2b: echo gave ${JSON.stringify(r.stdout)}`)
    for (let i = 0; i < cmds; i++) {
      t0 = now()
      await s.commands.run('true')
      out.cmd.push(ms(t0))
    }
  } finally {
    await s.kill()
  }
}

async function oursRound(out) {
  let t0 = now()
  const s = await ours.sandboxes.create({ template: 'base' })
  try {
    const r = await s.exec('echo hi')
    out.create.push(ms(t0))
    if (r.stdout !== 'hi\n') throw new Error(`sdk: echo gave ${JSON.stringify(r.stdout)}`)
    for (let i = 0; i < cmds; i++) {
      t0 = now()
      await s.exec('true')
      out.cmd.push(ms(t0))
    }
  } finally {
    await s.kill()
  }
}

const e2b = { create: [], cmd: [] }
const sdk = { create: [], cmd: [] }
await e2bRound({ create: [], cmd: [] }) // warm both paths
await oursRound({ create: [], cmd: [] })
for (let i = 0; i < rounds; i++) {
  if (i % 2 === 0) {
    await e2bRound(e2b)
    await oursRound(sdk)
  } else {
    await oursRound(sdk)
    await e2bRound(e2b)
  }
}
const r1 = (x) => Math.round(x * 10) / 10
const res = {
  rounds,
  commands_per_round: cmds,
  e2b_create_cmd_p50_ms: r1(pct(e2b.create, 50)),
  e2b_create_cmd_p99_ms: r1(pct(e2b.create, 99)),
  sdk_create_cmd_p50_ms: r1(pct(sdk.create, 50)),
  sdk_create_cmd_p99_ms: r1(pct(sdk.create, 99)),
  create_cmd_e2b_ratio: Math.round(pct(e2b.create, 50) / pct(sdk.create, 50) * 100) / 100,
  e2b_cmd_p50_ms: r1(pct(e2b.cmd, 50)),
  e2b_cmd_p99_ms: r1(pct(e2b.cmd, 99)),
  sdk_cmd_p50_ms: r1(pct(sdk.cmd, 50)),
  sdk_cmd_p99_ms: r1(pct(sdk.cmd, 99)),
  cmd_e2b_ratio: Math.round(pct(e2b.cmd, 50) / pct(sdk.cmd, 50) * 100) / 100,
}
console.log(JSON.stringify(res, null, 2))
