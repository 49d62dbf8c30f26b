// A stand-in for wildcard DNS, for tests only: names under the test's
// sandbox domain (E2B_TLS_DOMAIN without its port; "localhost" here)
// resolve to this machine's loopback, as `*.DOMAIN` and `api.DOMAIN`
// records pointing at the server would in production. Everything else
// resolves as usual. It replaces dns.lookup, which Node's net and tls —
// and so undici and fetch — call for every connection; `looked` records
// the names it answered, so a test can show which hosts were dialled.
import dns from 'node:dns'

const domain = (process.env.E2B_TLS_DOMAIN || 'localhost').replace(/:\d+$/, '').toLowerCase()
export const looked = []
const system = dns.lookup
dns.lookup = function lookup(host, opts, cb) {
  if (typeof opts === 'function') {
    cb = opts
    opts = {}
  } else if (typeof opts === 'number') {
    opts = { family: opts }
  }
  const name = String(host).toLowerCase()
  if (name === domain || name.endsWith(`.${domain}`)) {
    looked.push(name)
    if (opts && opts.all) return process.nextTick(cb, null, [{ address: '127.0.0.1', family: 4 }])
    return process.nextTick(cb, null, '127.0.0.1', 4)
  }
  return system.call(this, host, opts, cb)
}
