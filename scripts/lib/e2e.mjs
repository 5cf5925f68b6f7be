// e2e.mjs: what the browser end-to-end scripts (scripts/console/e2e.mjs,
// scripts/webchat/e2e.mjs) share: a free loopback port, child processes
// started with their output in a log file (and killed at the end), and a
// wait for an HTTP endpoint to answer as expected.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// children are the processes start started; the caller kills them when done.
export const children = []

// freePort asks the kernel for a port nobody listens on (never a fixed one).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

// start runs cmd with env added to this process's, its output appended to logFile.
export function start(cmd, args, env, logFile) {
  const out = fs.openSync(logFile, 'a')
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', out, out] })
  children.push(child)
  return child
}

// waitHttp polls url (a string, or {url, init} for a request with options)
// until ok(response) holds, or fails after ms.
export async function waitHttp(url, ok, what, ms = 30000) {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      const res = await fetch(url.url || url, url.init)
      if (ok(res)) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`${what} did not answer within ${ms} ms`)
    await sleep(100)
  }
}
