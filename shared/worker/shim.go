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
const shim = `'use strict'
const http = require('http')
const port = Number(process.env.PORT)
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
