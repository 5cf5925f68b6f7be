// `bp dev` of the official CLI (@botpress/cli 0.8.59) through the local
// platform's own tunnel, as a user runs it:
//
//   bp login --apiUrl <platform> --token <PAT> --workspaceId <ws>
//   bp init --type bot --name echo-bot          (the CLI's echo-bot template)
//   bp dev --tunnelUrl <platform> --apiUrl <platform>
//
// then a user's message sent through the API reaches the dev bot (the
// runtime delivers to the bot's url, <platform>/<tunnelId>, which the
// platform relays over the CLI's WebSocket to the bot on this machine) and
// the bot's reply is stored. Stopping `bp dev` frees the tunnel: a delivery
// to it is answered 502 (BadGateway, retried by the runtime). Then an
// integration (the CLI's empty-integration template with answering
// handlers) under `bp dev`: installed on a bot, its register handler is
// called through the tunnel, and a POST to its webhook url reaches its
// handler, whose answer comes back as it wrote it.
//
//   node dev.mjs PLATFORM_BINARY WORK_DIR
//
// Starts the platform on a free loopback port with WORK_DIR/data, runs the
// CLI with its home in WORK_DIR/home and the project in WORK_DIR/project,
// and stops everything it started, whatever happens. Prints the timings.
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import bpclient from '@botpress/client'

const { Client } = bpclient
const HERE = path.dirname(fileURLToPath(import.meta.url))
const BP = path.join(HERE, 'node_modules', '.bin', 'bp')
const [binary, work] = process.argv.slice(2)
if (!binary || !work) {
  console.error('usage: node dev.mjs PLATFORM_BINARY WORK_DIR')
  process.exit(2)
}

const children = [] // process groups to stop on exit
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const step = (s) => console.error(`==> ${s}`)

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

// start runs a command in its own process group, output to a log file.
function start(cmd, args, logFile, opts = {}) {
  const out = fs.openSync(logFile, 'a')
  const child = spawn(cmd, args, { ...opts, stdio: ['ignore', out, out], detached: true })
  fs.closeSync(out)
  child.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })))
  children.push(child)
  return child
}

async function stop(child, signal = 'SIGINT', graceMs = 10000) {
  if (child.exitCode !== null || child.signalCode !== null) return
  try {
    process.kill(-child.pid, signal)
  } catch {}
  const done = await Promise.race([child.exited, sleep(graceMs).then(() => null)])
  if (!done) {
    try {
      process.kill(-child.pid, 'SIGKILL')
    } catch {}
    await child.exited
  }
}

// Fatal is a state a poll sees that will not change (a registration that
// failed): until rethrows it at once.
class Fatal extends Error {}

// until polls fn until it answers a truthy value (returned), at most
// timeoutMs. A poll that throws (a refused connection, an assertion on a
// state not reached yet) is retried like one answering false: the loop
// fails only when its time is up, with the last error.
async function until(what, fn, timeoutMs, child, logFile, everyMs = 100) {
  const deadline = Date.now() + timeoutMs
  let lastErr
  for (;;) {
    try {
      const v = await fn()
      if (v) return v
    } catch (err) {
      if (err instanceof Fatal) throw err
      lastErr = err
    }
    if (child && (child.exitCode !== null || child.signalCode !== null)) {
      throw new Error(`${what}: the process exited (${child.exitCode ?? child.signalCode})\n${tail(logFile)}`)
    }
    if (Date.now() > deadline) {
      const last = lastErr ? `\nlast error: ${lastErr.stack ?? lastErr}` : ''
      throw new Error(`${what}: not within ${timeoutMs} ms${last}\n${tail(logFile)}`)
    }
    await sleep(everyMs)
  }
}

function tail(file) {
  if (!file || !fs.existsSync(file)) return ''
  const lines = fs.readFileSync(file, 'utf8').split('\n')
  return `--- last lines of ${file} ---\n` + lines.slice(-30).join('\n')
}

// bp runs one CLI command to its end.
function bp(args, cwd) {
  const r = spawnSync(BP, args, { cwd, encoding: 'utf8', timeout: 60000, env: cliEnv })
  if (r.status !== 0) {
    throw new Error(`bp ${args[0]} failed (${r.status ?? r.signal}):\n${r.stdout}\n${r.stderr}`)
  }
  return r.stdout + r.stderr
}

// The CLI reads no BP_* variable for these, but the bot's worker would
// inherit them: keep them out.
const cliEnv = { ...process.env }
for (const k of ['BP_TOKEN', 'BP_API_URL', 'BP_WORKSPACE_ID', 'BP_BOT_ID']) delete cliEnv[k]

async function main() {
  const data = path.join(work, 'data')
  const home = path.join(work, 'home')
  const projects = path.join(work, 'project')
  fs.mkdirSync(projects, { recursive: true })

  // 1. The platform, fresh.
  const port = await freePort()
  const apiUrl = `http://127.0.0.1:${port}`
  const serverLog = path.join(work, 'server.log')
  step(`starting the local platform at ${apiUrl}`)
  const server = start(binary, ['--addr', `127.0.0.1:${port}`, '--data-dir', data], serverLog)
  const token = await until('the platform answers', async () => {
    try {
      const t = fs.readFileSync(path.join(data, 'admin-token'), 'utf8').trim()
      const res = await fetch(`${apiUrl}/v1/admin/account/me`, { headers: { Authorization: `Bearer ${t}` } })
      return res.status === 200 && t
    } catch {
      return false
    }
  }, 60000, server, serverLog)
  const admin = new Client({ apiUrl, token })
  const { workspace } = await admin.createWorkspace({ name: 'bp dev e2e' }).then((w) => ({ workspace: w.workspace ?? w }))

  // 2. bp login, bp init (the echo-bot template). The project resolves
  //    @botpress/sdk from this package's node_modules.
  step('bp login')
  const login = bp(['login', '--apiUrl', apiUrl, '--token', token, '--workspaceId', workspace.id, '--botpressHome', home, '-y'])
  assert.match(login, /Logged In/)
  step('bp init --type bot --name echo-bot')
  bp(['init', '--type', 'bot', '--name', 'echo-bot', '--workDir', projects, '--botpressHome', home, '-y'])
  const project = path.join(projects, 'echo-bot')
  assert.ok(fs.existsSync(path.join(project, 'src', 'index.ts')), 'bp init wrote the echo-bot template')
  fs.symlinkSync(path.join(HERE, 'node_modules'), path.join(project, 'node_modules'), 'dir')

  // 3. bp dev through the platform's tunnel.
  const devPort = await freePort()
  const devLog = path.join(work, 'bp-dev.log')
  step(`bp dev --tunnelUrl ${apiUrl}`)
  const t0 = Date.now()
  const dev = start(BP, ['dev', '--tunnelUrl', apiUrl, '--apiUrl', apiUrl, '--token', token, '--workspaceId', workspace.id,
    '--port', String(devPort), '--botpressHome', home, '-y'], devLog, { cwd: project, env: cliEnv })
  const botId = await until('bp dev deploys the dev bot and starts its worker', () => {
    const log = fs.existsSync(devLog) ? fs.readFileSync(devLog, 'utf8') : ''
    const m = log.match(/Dev Bot deployed with id "(bot_[0-9A-Za-z]+)"/)
    return m && new RegExp(`Listening on port ${devPort}`).test(log) && m[1]
  }, 90000, dev, devLog)
  const devReady = Date.now() - t0

  const { bot } = await new Client({ apiUrl, token, workspaceId: workspace.id }).getBot({ id: botId })
  assert.equal(bot.dev, true, 'a dev bot')
  // The API does not show a bot's url (nor does Botpress's); the platform
  // logs the tunnel the CLI opened, whose url bp dev registered.
  const tunnelId = await until('the platform logs the tunnel bp dev opened',
    () => fs.readFileSync(serverLog, 'utf8').match(/tunnel connected tunnelId=([0-9a-f-]{36})/)?.[1], 10000, null, serverLog)
  const tunnelUrl = `${apiUrl}/${tunnelId}`

  // 4. A user's message through the API reaches the dev bot; its reply is stored.
  step('a user message through the runtime, over the tunnel, to the dev bot')
  const chat = new Client({ apiUrl, token, botId })
  const { user } = await chat.createUser({ tags: {} })
  const { conversation } = await chat.createConversation({ channel: 'channel', tags: {} })
  const rounds = []
  for (const text of ['hello', 'second', 'third']) {
    const sent = Date.now()
    const { message } = await chat.createMessage({ conversationId: conversation.id, userId: user.id, type: 'text', payload: { text }, tags: {} })
    const reply = await until(`the bot's reply to "${text}"`, async () => {
      const { messages } = await chat.listMessages({ conversationId: conversation.id })
      return messages.find((m) => m.userId === botId && m.payload.text === `You said: ${text}`)
    }, 30000, dev, devLog, 10)
    rounds.push(Date.now() - sent)
    assert.ok(reply.createdAt >= message.createdAt)
  }
  // Each delivery went to <platform>/<tunnelId> and through the tunnel (the
  // request log's line comes when the delivery's answer has, which may be
  // after the reply was stored).
  await until('three deliveries logged as relayed through the tunnel', () => fs.readFileSync(serverLog, 'utf8').split('\n')
    .filter((l) => l.includes(`path=/${tunnelId} status=200`) && l.includes('caller=tunnel')).length >= 3, 10000, null, serverLog)

  // 5. bp dev stops: the tunnel is gone, a request to it is a clear 502.
  step('stopping bp dev')
  await stop(dev)
  // The state waited for is "no client is connected": until then a 502 may
  // also say that the client left before answering (a request caught while
  // bp dev stopped), which is not the state asserted.
  const freed = await until('the tunnel is freed', async () => {
    const res = await fetch(tunnelUrl, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
    if (res.status !== 502) return false
    const body = await res.json()
    return /no client is connected to tunnel/.test(body.message) ? body : false
  }, 15000)
  assert.equal(freed.type, 'BadGateway')
  assert.match(freed.id, /^err_/)
  // The platform is healthy.
  assert.equal((await fetch(`${apiUrl}/v1/admin/account/me`, { headers: { Authorization: `Bearer ${token}` } })).status, 200)

  // 6. An integration under bp dev, through its own tunnel: installing it
  //    calls its register handler, and a POST to its webhook url reaches
  //    its handler, whose answer comes back verbatim. The project is the
  //    CLI's empty-integration template (what `bp init --type integration`
  //    copies), with handlers that answer.
  step('bp dev of an integration: register and a webhook through the tunnel')
  const integ = path.join(projects, 'tunnel-probe')
  fs.cpSync(path.join(HERE, 'node_modules', '@botpress', 'cli', 'templates', 'empty-integration'), integ, { recursive: true })
  const pkg = JSON.parse(fs.readFileSync(path.join(integ, 'package.json'), 'utf8'))
  fs.writeFileSync(path.join(integ, 'package.json'), JSON.stringify({ ...pkg, name: 'tunnel_probe', integrationName: 'tunnel-probe' }, null, 2))
  fs.writeFileSync(path.join(integ, 'src', 'index.ts'), `import * as bp from '.botpress'

export default new bp.Integration({
  register: async ({ webhookUrl }) => {
    console.info('registered with webhook url', webhookUrl)
  },
  unregister: async () => {},
  actions: {},
  channels: {},
  handler: async ({ req }) => ({
    status: 202,
    headers: { 'content-type': 'application/json', 'x-probe': 'bp-dev' },
    body: JSON.stringify({ method: req.method, path: req.path, query: req.query, body: req.body }),
  }),
})
`)
  fs.symlinkSync(path.join(HERE, 'node_modules'), path.join(integ, 'node_modules'), 'dir')
  const integPort = await freePort()
  const integLog = path.join(work, 'bp-dev-integration.log')
  const integDev = start(BP, ['dev', '--tunnelUrl', apiUrl, '--apiUrl', apiUrl, '--token', token, '--workspaceId', workspace.id,
    '--port', String(integPort), '--botpressHome', home, '-y'], integLog, { cwd: integ, env: cliEnv })
  const integrationId = await until('bp dev deploys the dev integration and starts its worker', () => {
    const log = fs.existsSync(integLog) ? fs.readFileSync(integLog, 'utf8') : ''
    const m = log.match(/Dev Integration deployed with id "([^"]+)"/)
    return m && new RegExp(`Listening on port ${integPort}`).test(log) && m[1]
  }, 90000, integDev, integLog)
  const ws = new Client({ apiUrl, token, workspaceId: workspace.id })
  const { bot: host } = await ws.createBot({ name: 'hosts-the-probe', dev: true })
  await ws.updateBot({ id: host.id, integrations: { [integrationId]: { enabled: true, configuration: {} } } })
  const install = await until('the installation is registered', async () => {
    const { bot: b } = await ws.getBot({ id: host.id })
    const i = b.integrations[integrationId]
    if (i?.status === 'registration_failed') throw new Fatal(`registration failed: ${i.statusReason}\n${tail(integLog)}`)
    return i?.status === 'registered' && i
  }, 30000, integDev, integLog)
  const hook = await fetch(`${install.webhookUrl}/hook?x=1`, { method: 'POST', body: '{"update":1}', headers: { 'content-type': 'application/json' } })
  assert.equal(hook.status, 202, `webhook answer: ${hook.status} ${await hook.clone().text()}`)
  assert.equal(hook.headers.get('x-probe'), 'bp-dev')
  const got = await hook.json()
  assert.equal(got.method, 'POST')
  assert.equal(got.path, '/hook')
  assert.equal(got.query, 'x=1')
  assert.equal(got.body, '{"update":1}')
  await stop(integDev)

  step('stopping the platform')
  await stop(server)
  assert.equal(server.exitCode, 0, `the platform exits cleanly on SIGINT\n${tail(serverLog)}`)
  const median = [...rounds].sort((a, b) => a - b)[1]
  console.log(`bp dev through the tunnel: ok (bp dev ready in ${devReady} ms; message -> reply round trips ${rounds.join(', ')} ms, median ${median} ms)`)
}

let failed = false
try {
  await main()
} catch (err) {
  failed = true
  console.error(`cli-e2e: FAILED: ${err.stack || err}`)
} finally {
  for (const c of children.reverse()) await stop(c, 'SIGINT', 5000)
}
process.exit(failed ? 1 : 0)
