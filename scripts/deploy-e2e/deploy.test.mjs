// bp deploy end to end (run.sh starts the platform and sets API_URL,
// DATA_DIR, WORK_DIR): the official CLI 0.8.59 as a user runs it. login;
// init the echo-bot template; build; deploy (a new bot, code and no url);
// the bot answers a message through the runtime (its code runs in the
// platform's worker); a redeploy changes what it says; bots ls / rm. An
// integration deployed with code, icon and readme is installed, registers
// and answers its webhook; integrations ls lists it; interfaces ls lists an
// interface of the workspace. An SDK 0.10 integration (x-integration-id
// only) carries a provider's message to the deployed bot and its reply back.
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

// An integration written with SDK 0.10 (as Botpress's open-source telegram,
// twilio and webhook of that era): its API calls carry x-integration-id
// only. Deployed by the CLI as "e2e/chan" (the handle prepended), installed
// by its id as bp deploy of a bot installs it, it gets the official name
// "chan" as alias: a provider's webhook becomes a message the deployed echo
// bot sees with chan: tags, and the bot's reply reaches the integration's
// channel handler. A register that throws says why in statusReason.
test('SDK 0.10 integration (x-integration-id only): webhook to bot, reply to channel, register failure cause', async () => {
  await bp(work, 'init', '-y', '--type', 'integration', '--name', 'chan')
  const dir = path.join(work, 'chan')
  fs.writeFileSync(path.join(dir, 'integration.definition.ts'), `import { z, IntegrationDefinition } from '@botpress/sdk'
export default new IntegrationDefinition({
  name: 'chan',
  version: '0.1.0',
  configuration: { schema: z.object({ fail: z.boolean().optional() }) },
  channels: {
    channel: {
      messages: { text: { schema: z.object({ text: z.string() }) } },
      message: { tags: { id: {} } },
      conversation: { tags: { chatId: {} } },
    },
  },
  user: { tags: { id: {} } },
  events: { typing: { schema: z.object({}) } },
})
`)
  fs.writeFileSync(path.join(dir, 'src', 'index.ts'), `import * as bp from '.botpress'
export default new bp.Integration({
  register: async ({ ctx }) => {
    if (ctx.configuration.fail) {
      const err: any = new Error('getaddrinfo ENOTFOUND api.chan.invalid')
      err.code = 'ENOTFOUND'
      throw err
    }
  },
  unregister: async () => {},
  actions: {},
  channels: {
    channel: {
      messages: {
        text: async ({ payload, conversation, logger }) => {
          console.info('sent to ' + conversation.tags.chatId + ': ' + payload.text)
        },
      },
    },
  },
  handler: async ({ req, client }) => {
    const update = JSON.parse(req.body ?? '{}')
    const { user } = await client.getOrCreateUser({ tags: { id: update.fromId } })
    const { conversation } = await client.getOrCreateConversation({ channel: 'channel', tags: { chatId: update.chatId } })
    await client.createEvent({ type: 'typing', payload: {} })
    await client.createMessage({ conversationId: conversation.id, userId: user.id, type: 'text', payload: { text: update.text }, tags: { id: update.chatId + '-1' } })
  },
})
`)
  await bp(dir, 'deploy', '-y')
  const { integrations } = await api('GET', '/v1/admin/integrations?name=e2e/chan', undefined, ws)
  assert.equal(integrations.length, 1, 'published as e2e/chan')
  const intId = integrations[0].id

  // The echo bot, deployed as code, with the integration installed by id.
  await bp(work, 'init', '-y', '--type', 'bot', '--name', 'echo-chan')
  const botDir = path.join(work, 'echo-chan')
  const deployed = await bp(botDir, 'deploy', '-y', '--createNewBot')
  const botId = deployed.match(/Bot created with ID "(bot_[0-9A-Z]+)"/)?.[1]
  assert.ok(botId, deployed)
  await api('PUT', `/v1/admin/bots/${botId}`, { integrations: { [intId]: { enabled: true, configuration: {} } } }, ws)
  const { bot } = await api('GET', `/v1/admin/bots/${botId}`, undefined, { ...ws, 'x-multiple-integrations': 'true' })
  assert.deepEqual(Object.keys(bot.integrations), ['chan'], 'installed under the official name')
  const inst = bot.integrations.chan
  assert.equal(inst.status, 'registered', JSON.stringify(inst))

  const hook = await fetch(inst.webhookUrl, { method: 'POST', body: JSON.stringify({ chatId: '555', fromId: '77', text: 'hello' }) })
  assert.equal(hook.status, 200, await hook.text())
  const chat = { 'x-bot-id': botId }
  const { conversations } = await api('GET', '/v1/chat/conversations?tags.chan:chatId=555', undefined, chat)
  assert.equal(conversations.length, 1, 'the bot sees the conversation with the chan:chatId tag')
  assert.equal(conversations[0].integration, 'chan')
  const q = `timeStart=${new Date(Date.now() - 3600_000).toISOString()}&timeEnd=${new Date(Date.now() + 60_000).toISOString()}`
  await eventually('the bot\'s reply reaches the integration\'s channel handler', async () => {
    const { logs } = await api('GET', `/v1/admin/integrations/${intId}/logs?${q}`, undefined, ws)
    return logs.some((l) => l.message.includes('sent to 555: You said: hello'))
  })
  const { events } = await api('GET', '/v1/chat/events?type=chan:typing', undefined, chat)
  assert.equal(events.length, 1, 'the integration\'s event reaches the bot as chan:typing')

  // A register that throws: the cause, not only the SDK's generic message.
  const { bot: other } = await api('POST', '/v1/admin/bots', { name: 'chan-fails' }, ws)
  await api('PUT', `/v1/admin/bots/${other.id}`, { integrations: { [intId]: { enabled: true, configuration: { fail: true } } } }, ws)
  const { bot: failed } = await api('GET', `/v1/admin/bots/${other.id}`, undefined, ws)
  const reason = failed.integrations[intId].statusReason
  assert.equal(failed.integrations[intId].status, 'registration_failed')
  assert.match(reason, /ENOTFOUND api\.chan\.invalid/)
  console.log(`statusReason of a failed register: ${reason}`)
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
