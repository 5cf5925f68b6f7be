package worker

import (
	"fmt"
	"os"
	"path/filepath"
)

// The files are .cjs: CommonJS whatever package.json encloses the data
// directory says ("type": "module" would make a .js file an ES module).
const (
	bundleFile = "bundle.cjs"
	shimFile   = "shim.cjs"
)

// shim runs a bundle the way the CLI's bp dev does: the default export's
// start(port) (the SDK's bot or integration serves HTTP itself), else the
// bundle's handler(req) (Lambda style) behind a plain HTTP server. A bundle
// with neither exits with a message saying so (its start fails with it).
//
// Before it loads the bundle it installs the logged-error capture
// (loggedErrorCapture): what the code writes to console.error while it
// handles a request rides back on that request's answer.
const shim = `'use strict'
const http = require('http')
const port = Number(process.env.PORT)
` + loggedErrorCapture + `
const bundle = require(process.argv[2])
const impl = bundle && bundle.default !== undefined ? bundle.default : bundle
if (impl && typeof impl.start === 'function') {
  impl.start(port)
} else {
  const handler = (bundle && typeof bundle.handler === 'function') ? bundle.handler : (impl && typeof impl.handler === 'function' ? impl.handler : null)
  if (!handler) {
    console.error('the deployed code exports neither default.start(port) nor handler(req)')
    process.exit(3)
  }
  http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', async () => {
      const u = new URL(req.url, 'http://localhost')
      if (u.pathname === '/health') { res.writeHead(200); res.end('ok'); return }
      const headers = {}
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v
      try {
        const out = (await handler({ method: req.method, path: u.pathname, query: u.search.slice(1), headers, body: Buffer.concat(chunks).toString('utf8') })) || {}
        res.writeHead(out.status || 200, out.headers || {})
        res.end(out.body === undefined ? '{}' : out.body)
      } catch (err) {
        console.error(err && err.stack ? err.stack : String(err))
        res.writeHead(500, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ id: 'err_worker', code: 500, type: 'Internal', message: 'the deployed code threw: ' + String(err && err.message || err) }))
      }
    })
  }).listen(port, '127.0.0.1')
}
`

// loggedErrorCapture puts on each HTTP answer the code's server gives the
// first line it wrote to console.error while handling that request
// (X-Bp-Logged-Error, URL-encoded, at most 500 characters; see
// delivery.LoggedErrorHeader): the SDK answers an unexpected exception with
// a generic message and logs the cause. The request's handling runs inside
// an AsyncLocalStorage context, so a line is attributed to the request
// whose handling wrote it, even with requests in flight concurrently. The
// same capture is in the Lambda entry (shared/lambdarunner/entry.cjs).
const loggedErrorCapture = `{
  const { AsyncLocalStorage } = require('async_hooks')
  const util = require('util')
  const als = new AsyncLocalStorage()
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
  const error = console.error
  console.error = function () {
    const store = als.getStore()
    if (store && !store.logged) {
      const line = util.format.apply(util, arguments).split('\n').map((l) => l.trim()).find((l) => l !== '') || ''
      store.logged = line.slice(0, 500)
    }
    return error.apply(this, arguments)
  }
}`

// writeBundle writes the bundle and the shim into dir, private to this
// user (the bundle may hold secrets of its own).
func writeBundle(dir string, code []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("worker directory: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, bundleFile), code, 0o600); err != nil {
		return fmt.Errorf("write the bundle: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, shimFile), []byte(shim), 0o600); err != nil {
		return fmt.Errorf("write the shim: %w", err)
	}
	return nil
}
