// Helpers of the runtime tests: start the plain-JS SDK fixtures
// (fixtures/bot.js, fixtures/integration.js, on @botpress/sdk 7.2.4) as
// processes on loopback ports, and register them with the platform the way
// a developer does without the CLI (protocol notes 7.3 (b)):
// createIntegration({dev: true, url}), createBot({dev: true, url}) then
// updateBot({integrations}).
//
// A fixture prints one JSON line per call it handles ({"op": ...});
// fixture.waitFor(predicate) waits for such a line.
import { spawn } from 'node:child_process'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { apiUrl, adminToken, unique } from './env.mjs'

const fixturesDir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures')

/** freePort returns a loopback port nobody listens on (yet). */
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

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/**
 * startFixture runs fixtures/<file> with node on a free loopback port, with
 * BP_API_URL pointing at the platform and BP_TOKEN = token (the admin's
 * personal access token by default, as `bp dev` does). It resolves once
 * the SDK server answers /health. The returned fixture has:
 *   url        http://127.0.0.1:<port>
 *   seen       every JSON line the fixture printed, in order
 *   waitFor(pred, ms)  the first line (past or future) matching pred
 *   stop()     SIGKILL and wait for the exit
 */
export async function startFixture(file, { token = adminToken(), env = {} } = {}) {
  const port = await freePort()
  const child = spawn(process.execPath, [path.join(fixturesDir, file)], {
    env: { ...process.env, ...env, PORT: String(port), BP_API_URL: apiUrl, BP_TOKEN: token },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const fixture = {
    url: `http://127.0.0.1:${port}`,
    seen: [],
    stderr: '',
    waiters: [],
    exited: false,
    async waitFor(pred, ms = 10000) {
      const found = this.seen.find(pred)
      if (found) return found
      return new Promise((resolve, reject) => {
        const w = { pred, resolve }
        const t = setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w)
          reject(new Error(`${file}: no matching call within ${ms} ms; seen: ${JSON.stringify(this.seen).slice(0, 2000)}; stderr: ${this.stderr.slice(-2000)}`))
        }, ms)
        w.resolve = (v) => {
          clearTimeout(t)
          resolve(v)
        }
        this.waiters.push(w)
      })
    },
    async stop() {
      if (this.exited) return
      const done = new Promise((r) => child.once('exit', r))
      child.kill('SIGKILL')
      await done
    },
  }
  let buf = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (chunk) => {
    buf += chunk
    let i
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 1)
      let v
      try {
        v = JSON.parse(line)
      } catch {
        continue // the SDK's own log lines
      }
      fixture.seen.push(v)
      for (const w of [...fixture.waiters]) {
        if (w.pred(v)) {
          fixture.waiters = fixture.waiters.filter((x) => x !== w)
          w.resolve(v)
        }
      }
    }
  })
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (chunk) => {
    fixture.stderr = (fixture.stderr + chunk).slice(-10000)
  })
  child.once('exit', () => {
    fixture.exited = true
  })
  // Ready when the SDK's server answers /health (within 15 s).
  for (let i = 0; ; i++) {
    if (fixture.exited) throw new Error(`${file} exited at start: ${fixture.stderr}`)
    try {
      const res = await fetch(`${fixture.url}/health`)
      if (res.status === 200) break
    } catch {}
    if (i > 150) {
      await fixture.stop()
      throw new Error(`${file} did not answer /health within 15 s: ${fixture.stderr}`)
    }
    await sleep(100)
  }
  return fixture
}

/** The integration definition matching fixtures/integration.js. */
export function integrationDefinition(name = unique('rt-int')) {
  return {
    name,
    version: '0.1.0',
    dev: true,
    configuration: { schema: { type: 'object', properties: {} } },
    channels: {
      channel: {
        messages: { text: { schema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } } },
        conversation: { tags: { id: {} } },
        message: { tags: { id: {} } },
      },
    },
    actions: {
      echo: {
        input: { schema: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: true } },
        output: { schema: { type: 'object' } },
      },
    },
    events: { pinged: { schema: { type: 'object' } } },
    user: { tags: { id: {} } },
  }
}

/**
 * setupRuntime starts the two fixtures and registers them in workspace
 * `ws` (a client with x-workspace-id): the integration (dev, its url), the
 * bot (dev, its url) with the integration installed under `alias`. It
 * returns {bot, integration, install, botFixture, integrationFixture, stop}.
 * `install` is the bot's view of the installation (status, webhookUrl...).
 */
export async function setupRuntime(ws, { alias = 'chan', botEnv = {}, integrationEnv = {} } = {}) {
  const integrationFixture = await startFixture('integration.js', { env: integrationEnv })
  let botFixture
  try {
    botFixture = await startFixture('bot.js', { env: botEnv })
    const { integration } = await ws.createIntegration({ ...integrationDefinition(), url: integrationFixture.url })
    const { bot: created } = await ws.createBot({ dev: true, url: botFixture.url })
    const { bot } = await ws.updateBot({
      id: created.id,
      integrations: { [alias]: { integrationId: integration.id, enabled: true, configuration: {} } },
    })
    const install = bot.integrations[integration.id] ?? bot.integrations[alias]
    return {
      bot,
      integration,
      install,
      alias,
      botFixture,
      integrationFixture,
      async stop() {
        await Promise.all([botFixture.stop(), integrationFixture.stop()])
      },
    }
  } catch (e) {
    await Promise.all([integrationFixture.stop(), botFixture?.stop()])
    throw e
  }
}
