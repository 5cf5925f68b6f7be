'use strict'
// The entry of a deployed bot's or integration version's Lambda function
// (index.cjs in the function's zip, handler index.handler). It runs the
// bundle (bundle.cjs) as the local worker's shim and `bp dev` do: the
// default export's start(port) (the SDK serves HTTP itself on a loopback
// port of the sandbox, and each invocation is relayed to it), else the
// bundle's handler(req), called in process. An invocation's payload is
// the request {version, method, path, query, headers, body}; the answer
// is {status, headers, body}. Console output becomes log lines of the bot
// or integration in the platform's shape ({"id","botId"|"integrationId",
// "level","message"}, one JSON object per line on stdout), which is what
// getBotLogs and getIntegrationLogs query.
const http = require('http')
const util = require('util')
const crypto = require('crypto')
const path = require('path')

const owner = process.env.BP_INTEGRATION_ID
  ? { integrationId: process.env.BP_INTEGRATION_ID }
  : { botId: process.env.BP_BOT_ID || '' }

// Log line ids: "log_" + a ULID (48-bit time, 80 random bits), like the
// platform's own.
const B32 = '0123456789ABCDEFGHJKMNPQRSTVWXYZ'
function ulid () {
  let t = Date.now()
  let out = ''
  for (let i = 0; i < 10; i++) { out = B32[t % 32] + out; t = Math.floor(t / 32) }
  const r = crypto.randomBytes(16)
  for (let i = 0; i < 16; i++) out += B32[r[i] % 32]
  return out
}
const MAX_MESSAGE = 32 << 10
function write (level, args) {
  let message = util.format(...args)
  if (message.length > MAX_MESSAGE) message = message.slice(0, MAX_MESSAGE) + '…'
  process.stdout.write(JSON.stringify({ id: 'log_' + ulid(), ...owner, level, message }) + '\n')
}
console.log = (...a) => write('info', a)
console.info = (...a) => write('info', a)
console.debug = (...a) => write('debug', a)
console.trace = (...a) => write('debug', a)
console.warn = (...a) => write('warn', a)
console.error = (...a) => { capture(a); write('error', a) }

// The logged-error capture of the local worker's shim (shared/worker,
// loggedErrorCapture): the first line the code writes to console.error
// while its server handles a request rides back on that request's answer
// as x-bp-logged-error (URL-encoded, at most 500 characters), which the
// relay below returns with the other headers. The SDK answers an
// unexpected exception with a generic message and logs the cause.
const { AsyncLocalStorage } = require('async_hooks')
const als = new AsyncLocalStorage()
function capture (args) {
  const store = als.getStore()
  if (store && !store.logged) {
    const line = util.format(...args).split('\n').map((l) => l.trim()).find((l) => l !== '') || ''
    store.logged = line.slice(0, 500)
  }
}
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (name, req, res) {
  if (name !== 'request' || !res || typeof res.writeHead !== 'function') return emit.apply(this, arguments)
  const store = { logged: '' }
  const writeHead = res.writeHead
  res.writeHead = function () {
    if (store.logged && !res.headersSent) {
      try { res.setHeader('x-bp-logged-error', encodeURIComponent(store.logged)) } catch (e) {}
    }
    return writeHead.apply(this, arguments)
  }
  // The request's own events ('data', 'end') come from the socket,
  // outside this context: they are emitted inside it too.
  const reqEmit = req.emit
  req.emit = function () { return als.run(store, () => reqEmit.apply(this, arguments)) }
  return als.run(store, () => emit.apply(this, arguments))
}

const version = process.env.BP_CODE_VERSION || ''
const port = Number(process.env.PORT || 8072)
const failure = (status, message) => ({
  status,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ id: 'err_lambda', code: status, type: status === 503 ? 'ServiceUnavailable' : 'Internal', message })
})

// Loading the bundle happens once per sandbox (cold start); a bundle that
// throws at load fails every invocation of this sandbox with its error.
let handler = null
let serving = false
let loadError = null
try {
  const bundle = require(path.join(__dirname, 'bundle.cjs'))
  const impl = bundle && bundle.default !== undefined ? bundle.default : bundle
  if (impl && typeof impl.start === 'function') {
    impl.start(port)
    serving = true
  } else if (bundle && typeof bundle.handler === 'function') {
    handler = bundle.handler
  } else if (impl && typeof impl.handler === 'function') {
    handler = impl.handler
  } else {
    loadError = new Error('the deployed code exports neither default.start(port) nor handler(req)')
  }
} catch (err) {
  loadError = err
}
if (loadError) console.error(loadError && loadError.stack ? loadError.stack : String(loadError))

function relay (req, attempt) {
  return new Promise((resolve, reject) => {
    const headers = { ...req.headers }
    const body = Buffer.from(req.body || '', 'utf8')
    headers['content-length'] = String(body.length)
    const path = (req.path || '/') + (req.query ? '?' + req.query : '')
    const r = http.request({ host: '127.0.0.1', port, method: req.method || 'POST', path, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => {
        const out = {}
        for (const [k, v] of Object.entries(res.headers)) out[k] = Array.isArray(v) ? v.join(', ') : v
        resolve({ status: res.statusCode, headers: out, body: Buffer.concat(chunks).toString('utf8') })
      })
      res.on('error', reject)
    })
    r.on('error', (err) => {
      // The server of the bundle may not listen yet (cold start): retry
      // for up to 10 s, then fail.
      if (err.code === 'ECONNREFUSED' && attempt < 200) {
        setTimeout(() => relay(req, attempt + 1).then(resolve, reject), 50)
        return
      }
      reject(err)
    })
    r.end(body)
  })
}

exports.handler = async (event) => {
  const req = typeof event === 'string' ? JSON.parse(event) : (event || {})
  if (req.version && version && req.version !== version) {
    // The caller read a newer (or older) deployment than this function
    // runs: the function is being updated. Retryable.
    return failure(503, 'the deployed code is being updated (version ' + version + ' runs, ' + req.version + ' asked): retry')
  }
  if (loadError) {
    // Thrown: a function error, as a worker that exits while loading.
    throw new Error('the deployed code failed to load: ' + String(loadError && loadError.message || loadError))
  }
  if (req.path === '/health') return { status: 200, headers: {}, body: 'ok' }
  if (serving) return relay(req, 0)
  try {
    const out = (await handler({ method: req.method || 'POST', path: req.path || '/', query: req.query || '', headers: req.headers || {}, body: req.body || '' })) || {}
    return { status: out.status || 200, headers: out.headers || {}, body: out.body === undefined ? '{}' : out.body }
  } catch (err) {
    console.error(err && err.stack ? err.stack : String(err))
    return failure(500, 'the deployed code threw: ' + String(err && err.message || err))
  }
}
