// bp deploy end to end (run.sh starts the platform and sets API_URL,
// DATA_DIR, WORK_DIR): the official CLI 0.8.59 as a user runs it. login;
// init the echo-bot template; build; deploy (a new bot, code and no url);
// the bot answers a message through the runtime (its code runs in the
// platform's worker); a redeploy changes what it says; bots ls / rm. An
// integration deployed with code, icon and readme is installed, registers
// and answers its webhook; integrations ls lists it; interfaces ls lists an
// interface of the workspace.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import net from 'node:net'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'

const here = path.dirname(fileURLToPath(import.meta.url))
const cli = path.join(here, 'node_modules', '@botpress', 'cli', 'bin.js')
const apiUrl = process.env.API_URL
const work = process.env.WORK_DIR
const token = fs.readFileSync(path.join(process.env.DATA_DIR, 'admin-token'), 'utf8').trim()
const home = path.join(work, 'home') // the CLI's profile, not the user's
fs.mkdirSync(home, { recursive: true })

// bp runs the CLI in dir and returns its output; it fails the test with
// the output when the CLI exits non-zero.
function bp(dir, ...args) {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [cli, ...args, '--botpressHome', home], { cwd: dir, env: { ...process.env, HOME: home }, timeout: 120_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`bp ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`)) : resolve(stdout + stderr)))
  })
}

async function api(method, p, body, headers = {}) {
  const res = await fetch(apiUrl + p, {
    method, body: body === undefined ? undefined : JSON.stringify(body),
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
  })
  const text = await res.text()
  let json
  try { json = JSON.parse(text) } catch { json = text }
  if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${text}`)
  return json
}

async function eventually(what, f, ms = 30_000) {
  const end = Date.now() + ms
  let lastErr // a check that throws is retried: only the time up fails
  for (;;) {
    try {
      const v = await f()
      if (v) return v
    } catch (err) {
      lastErr = err
    }
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms${lastErr ? `; last error: ${lastErr.stack ?? lastErr}` : ''}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

const { id: workspaceId } = await api('POST', '/v1/admin/workspaces', { name: 'deploy-e2e' })
// bp deploy of an integration needs the workspace's handle.
await api('PUT', `/v1/admin/workspaces/${workspaceId}`, { handle: 'e2e' })
const ws = { 'x-workspace-id': workspaceId }

test('bot: login, init, build, deploy, answers, redeploy, ls, rm', async () => {
  const out = await bp(work, 'login', '-y', '--token', token, '--workspaceId', workspaceId, '--apiUrl', apiUrl)
  assert.match(out, /Logged In/)
  await bp(work, 'init', '-y', '--type', 'bot', '--name', 'echo')
  const dir = path.join(work, 'echo')
  await bp(dir, 'build')
  const bundle = path.join(dir, '.botpress', 'dist', 'index.js')
  console.log(`echo bot bundle: ${fs.statSync(bundle).size} bytes`)

  let t0 = Date.now()
  const deployed = await bp(dir, 'deploy', '-y', '--createNewBot')
  console.log(`bp deploy (build included): ${Date.now() - t0} ms`)
  const botId = deployed.match(/Bot created with ID "(bot_[0-9A-Z]+)"/)?.[1]
  assert.ok(botId, deployed)
  const { bot } = await api('GET', `/v1/admin/bots/${botId}`, undefined, ws)
  assert.ok(bot.deployedAt, 'deployedAt is set')

  // A user's message reaches the deployed code, which answers through the API.
  const chat = { 'x-bot-id': botId }
  const { conversation } = await api('POST', '/v1/chat/conversations', { channel: 'web', tags: {} }, chat)
  const { user } = await api('POST', '/v1/chat/users', { tags: {} }, chat)
  const say = async (text, want) => {
    const t = Date.now()
    await api('POST', '/v1/chat/messages', { conversationId: conversation.id, userId: user.id, type: 'text', payload: { text }, tags: {} }, chat)
    await eventually(`the reply "${want}"`, async () => {
      const { messages } = await api('GET', `/v1/chat/messages?conversationId=${conversation.id}`, undefined, chat)
      return messages.some((m) => m.userId === botId && m.payload.text === want)
    })
    return Date.now() - t
  }
  const cold = await say('hello', 'You said: hello')
  const warm = await say('again', 'You said: again')
  console.log(`first reply after deploy (worker cold start): ${cold} ms; next reply: ${warm} ms`)

  // Redeploy changed code: the next message meets it.
  const src = path.join(dir, 'src', 'index.ts')
  fs.writeFileSync(src, fs.readFileSync(src, 'utf8').replace('You said: ', 'Echo v2: '))
  t0 = Date.now()
  await bp(dir, 'deploy', '-y', '--botId', botId)
  console.log(`bp redeploy: ${Date.now() - t0} ms`)
  await say('third', 'Echo v2: third')

  // The worker's output is the bot's log.
  const q = `timeStart=${new Date(Date.now() - 3600_000).toISOString()}&timeEnd=${new Date(Date.now() + 60_000).toISOString()}`
  const { logs } = await api('GET', `/v1/admin/bots/${botId}/logs?${q}`, undefined, ws)
  assert.ok(logs.some((l) => l.message.includes('text message sent')), JSON.stringify(logs.slice(0, 5)))

  assert.match(await bp(work, 'bots', 'ls'), new RegExp(botId))
  await bp(work, 'bots', 'rm', botId)
  assert.doesNotMatch(await bp(work, 'bots', 'ls'), new RegExp(botId))
})

// On AWS a deployed bot runs in a Lambda function whose entry
// (shared/lambdarunner/entry.cjs) hands each invocation to the bundle. Here
// the entry runs the echo bot's real bundle under node, invoked as Lambda
// invokes it (handler(payload) -> {status, headers, body}) by a small relay
// the bot's url points at: the platform's own events reach it, its answer
// comes back through the API, its console output is the platform's log
// lines.
test('lambda entry: the echo bot bundle answers through the function entry', async () => {
  await bp(work, 'init', '-y', '--type', 'bot', '--name', 'echo-lambda')
  const dir = path.join(work, 'echo-lambda')
  await bp(dir, 'build')
  const fn = path.join(work, 'function')
  fs.mkdirSync(fn, { recursive: true })
  fs.copyFileSync(path.join(here, '..', '..', 'shared', 'lambdarunner', 'entry.cjs'), path.join(fn, 'index.cjs'))
  fs.copyFileSync(path.join(dir, '.botpress', 'dist', 'index.js'), path.join(fn, 'bundle.cjs'))
  fs.writeFileSync(path.join(fn, 'relay.cjs'), `const http = require('http')
const { handler } = require('./index.cjs')
http.createServer((req, res) => {
  const chunks = []
  req.on('data', (c) => chunks.push(c))
  req.on('end', () => {
    const u = new URL(req.url, 'http://relay')
    const headers = {}
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v
    handler({ version: process.env.BP_CODE_VERSION, method: req.method, path: u.pathname, query: u.search.slice(1), headers, body: Buffer.concat(chunks).toString() })
      .then((out) => { res.writeHead(out.status, out.headers); res.end(out.body) }, (err) => { res.writeHead(502); res.end(String(err)) })
  })
}).listen(Number(process.env.RELAY_PORT), '127.0.0.1', () => process.stderr.write('ready\\n'))
`)
  const free = () => new Promise((resolve) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)) }) })
  const relayPort = await free()
  const { bot } = await api('POST', '/v1/admin/bots', { name: 'echo-lambda', url: `http://127.0.0.1:${relayPort}` }, ws)
  const t0 = Date.now()
  const child = spawn(process.execPath, [path.join(fn, 'relay.cjs')], {
    cwd: fn,
    env: { PATH: process.env.PATH, RELAY_PORT: String(relayPort), PORT: String(await free()), BP_API_URL: apiUrl, BP_TOKEN: token, BP_BOT_ID: bot.id, BP_CODE_VERSION: 'v1' },
  })
  let out = ''
  child.stdout.on('data', (c) => { out += c })
  try {
    await new Promise((resolve, reject) => { child.stderr.once('data', resolve); child.once('exit', reject) })
    const loaded = Date.now() - t0
    const chat = { 'x-bot-id': bot.id }
    const { conversation } = await api('POST', '/v1/chat/conversations', { channel: 'web', tags: {} }, chat)
    const { user } = await api('POST', '/v1/chat/users', { tags: {} }, chat)
    const say = async (text) => {
      const t = Date.now()
      await api('POST', '/v1/chat/messages', { conversationId: conversation.id, userId: user.id, type: 'text', payload: { text }, tags: {} }, chat)
      await eventually('the reply through the function entry', async () => {
        const { messages } = await api('GET', `/v1/chat/messages?conversationId=${conversation.id}`, undefined, chat)
        return messages.some((m) => m.userId === bot.id && m.payload.text === `You said: ${text}`)
      })
      return Date.now() - t
    }
    const first = await say('lambda')
    const next = await say('again')
    console.log(`lambda entry: node start + entry + bundle load ${loaded} ms; first reply ${first} ms; next reply ${next} ms`)
    // The bundle's console output: log lines in the platform's shape.
    const lines = () => out.split('\n').filter(Boolean).map((l) => JSON.parse(l))
    await eventually('the log line of the reply', async () => lines().some((l) => l.message.includes('text message sent')))
    assert.ok(lines().every((l) => l.botId === bot.id && /^log_[0-9A-Z]{26}$/.test(l.id) && ['info', 'debug', 'warn', 'error'].includes(l.level)), out)
  } finally {
    child.kill()
  }
})

test('integration: deploy with code, icon and readme; install, register, webhook; integrations ls', async () => {
  await bp(work, 'init', '-y', '--type', 'integration', '--name', 'hello')
  const dir = path.join(work, 'hello')
  const src = path.join(dir, 'src', 'index.ts')
  // The template refuses to register; this one registers and answers its webhook.
  fs.writeFileSync(src, fs.readFileSync(src, 'utf8')
    .replaceAll("throw new sdk.RuntimeError('Invalid configuration') // replace this with your own validation logic", "console.info('registered')")
    .replace('handler: async () => {},', "handler: async ({ req }) => ({ status: 200, body: 'hook says ' + req.body }),"))
  const t0 = Date.now()
  await bp(dir, 'deploy', '-y')
  console.log(`bp deploy of an integration: ${Date.now() - t0} ms`)

  const { integrations } = await api('GET', '/v1/admin/integrations?name=e2e/hello', undefined, ws)
  assert.equal(integrations.length, 1)
  const { integration } = await api('GET', `/v1/admin/integrations/${integrations[0].id}`, undefined, ws)
  for (const [u, type] of [[integration.iconUrl, 'image/svg+xml'], [integration.readmeUrl, 'text/markdown']]) {
    const res = await fetch(u) // no token, as an <img> or a browser
    assert.equal(res.status, 200, u)
    assert.ok(res.headers.get('content-type').startsWith(type))
  }
  assert.match(await bp(work, 'integrations', 'ls'), /e2e\/hello/)

  const { bot } = await api('POST', '/v1/admin/bots', { name: 'uses-hello' }, ws)
  const { bot: updated } = await api('PUT', `/v1/admin/bots/${bot.id}`,
    { integrations: { hello: { integrationId: integration.id, enabled: true, configuration: {} } } },
    { ...ws, 'x-multiple-integrations': 'true' })
  const inst = updated.integrations.hello
  assert.equal(inst.status, 'registered', JSON.stringify(inst))
  const res = await fetch(inst.webhookUrl, { method: 'POST', body: 'ping' })
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'hook says ping')
})

test('interfaces ls lists the workspace\'s interfaces', async () => {
  await api('POST', '/v1/admin/interfaces', {
    name: 'creatable', version: '1.0.0',
    entities: { item: { title: 'Item', schema: { type: 'object' } } },
    actions: { create: { input: { schema: {} }, output: { schema: {} } } },
    events: {}, channels: {},
  }, ws)
  assert.match(await bp(work, 'interfaces', 'ls'), /creatable/)
})
