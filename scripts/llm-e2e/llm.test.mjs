// The official LLM clients against the local platform (run.sh starts it,
// its LLM provider being fake-upstream.mjs): @botpress/cognitive 0.5.4's
// v2 path (CognitiveBeta, and Cognitive with __experimental_beta as ADK
// agents use it) and @botpress/zai 2.6.21 on it, and a deployed
// @botpress/sdk 7.2.4 bot (sdk-bot.cjs) answering a user's message with the
// LLM's text. Each test checks what the provider received (the request
// mapping) and what the client read.
import { describe, test, before } from 'node:test'
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { buildSync } from 'esbuild'
import { Client } from '@botpress/client'
import { Cognitive, CognitiveBeta } from '@botpress/cognitive'
import { Zai } from '@botpress/zai'

const apiUrl = process.env.API_URL
const upstream = process.env.LLM_URL.replace(/\/v1$/, '')
const dataDir = process.env.DATA_DIR
const adminToken = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()

async function api(method, p, { token = adminToken, headers = {}, body } = {}) {
  const res = await fetch(apiUrl + p, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  return { status: res.status, body: text ? JSON.parse(text) : undefined }
}

async function upstreamRequests() {
  return (await fetch(upstream + '/_test/requests')).json()
}
async function nextAnswers(v) {
  await fetch(upstream + '/_test/next', { method: 'POST', body: JSON.stringify(v) })
}
async function lastUpstream() {
  const rs = await upstreamRequests()
  return rs[rs.length - 1]
}

// eventually resolves with f's first truthy value; an f that throws is
// retried: only the time up fails, with f's last error.
async function eventually(what, f, ms = 30_000) {
  const end = Date.now() + ms
  let lastErr
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

let ws, bot, botKey, botClient, beta

before(async () => {
  const admin = new Client({ apiUrl, token: adminToken })
  ws = (await admin.createWorkspace({ name: 'LLM e2e' })).id
  bot = (await new Client({ apiUrl, token: adminToken, workspaceId: ws }).createBot({ name: 'thinker' })).bot.id
  const key = await api('POST', '/v1/admin/bots/baks', { headers: { 'x-workspace-id': ws }, body: { botId: bot, note: 'llm-e2e' } })
  assert.equal(key.status, 200, JSON.stringify(key.body))
  botKey = key.body.value
  // As a bot's code has it: its own key and id, no workspace.
  botClient = new Client({ apiUrl, token: botKey, botId: bot })
  beta = new CognitiveBeta({ apiUrl, token: botKey, botId: bot })
})

test('generate-text maps the request for the provider and answers its text and usage', async () => {
  const res = await beta.generateText({
    model: 'openai:gpt-4o',
    messages: [
      { role: 'system', content: 'be brief' },
      { role: 'user', content: [{ type: 'text', text: 'hello there' }, { type: 'image', url: 'https://example.com/a.png', mimeType: 'image/png' }] },
    ],
    maxTokens: 50,
    stopSequences: ['END'],
    temperature: 0.3,
  })
  const sent = (await lastUpstream()).body
  assert.equal(sent.model, 'llama-test') // a known id the operator did not map: the first listed model
  assert.equal(sent.max_tokens, 50)
  assert.deepEqual(sent.stop, ['END'])
  assert.equal(sent.temperature, 0.3)
  assert.deepEqual(sent.messages, [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: [{ type: 'text', text: 'hello there' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] },
  ])
  assert.equal(sent.stream, undefined)
  assert.equal(res.output, 'echo: hello there')
  assert.equal(res.metadata.provider, 'openai')
  assert.equal(res.metadata.model, 'openai:llama-test')
  assert.equal(res.metadata.stopReason, 'stop')
  assert.deepEqual(res.metadata.usage, { inputTokens: 4, inputCost: 0, outputTokens: 3, outputCost: 0 })
})

test('responseFormat json asks the provider for a JSON object', async () => {
  const res = await beta.generateText({ model: 'best', responseFormat: 'json', messages: [{ role: 'user', content: 'as json' }] })
  assert.deepEqual((await lastUpstream()).body.response_format, { type: 'json_object' })
  assert.deepEqual(JSON.parse(res.output), { echo: 'as json' })
})

test('Cognitive (v2 path) generateContent: system prompt, output and tokens', async () => {
  const cognitive = new Cognitive({ client: botClient, __experimental_beta: true })
  const res = await cognitive.generateContent({
    model: 'openai:gpt-4o-mini',
    systemPrompt: 'you answer in echoes',
    messages: [{ role: 'user', type: 'text', content: 'ping' }],
  })
  const sent = (await lastUpstream()).body
  assert.deepEqual(sent.messages[0], { role: 'system', content: 'you answer in echoes' })
  assert.equal(res.output.choices[0].content, 'echo: ping')
  assert.equal(res.meta.tokens.output, 2)
  assert.ok(res.meta.tokens.input > 0)
  assert.equal(res.meta.model.integration, 'openai')
})

test('generate-text-stream streams the text, then the usage', async () => {
  const chunks = []
  for await (const ch of beta.generateTextStream({ model: 'fast', messages: [{ role: 'user', content: 'stream me please' }] })) {
    chunks.push(ch)
  }
  const sent = (await lastUpstream()).body
  assert.equal(sent.stream, true)
  assert.deepEqual(sent.stream_options, { include_usage: true })
  assert.ok(chunks.length >= 4, `${chunks.length} chunks`)
  assert.equal(chunks.map((c) => c.output || '').join(''), 'echo: stream me please')
  const last = chunks[chunks.length - 1]
  assert.equal(last.finished, true)
  assert.equal(last.metadata.usage.outputTokens, 4)
  assert.equal(last.metadata.stopReason, 'stop')
})

test('the models: <provider>:<model>, the aliases on the default', async () => {
  const models = await beta.listModels()
  assert.deepEqual(models.map((m) => m.id), ['openai:llama-test', 'openai:small-test'])
  assert.deepEqual(models[0].aliases, ['auto', 'best', 'fast'])
  assert.ok(models[0].input.maxTokens > 0 && models[0].output.maxTokens > 0)
})

test('zai runs on the platform (through Cognitive v2)', async () => {
  const before = (await upstreamRequests()).length
  const zai = new Zai({ client: new Cognitive({ client: botClient, __experimental_beta: true }), modelId: 'best' })
  const text = await zai.text('a haiku about platforms')
  const sent = (await upstreamRequests()).slice(before)
  assert.equal(sent.length, 1)
  assert.match(sent[0].body.messages[0].content, /Generate a text that fulfills the user prompt/)
  assert.equal(text, 'echo: a haiku about platforms')
})

test('errors: an unknown model is a 400 naming it; a failing provider a 502 after bounded retries', async () => {
  await assert.rejects(beta.generateText({ model: 'acme:nothing', messages: [{ role: 'user', content: 'x' }] }), (err) => {
    assert.equal(err.response?.status, 400)
    assert.match(err.response.data.message, /unknown model "acme:nothing"/)
    return true
  })
  const before = (await upstreamRequests()).length
  await nextAnswers({ fail: Array(20).fill(503) })
  try {
    await assert.rejects(beta.generateText({ messages: [{ role: 'user', content: 'x' }] }), (err) => {
      assert.equal(err.response?.status, 502)
      assert.equal(err.response.data.type, 'BadGateway')
      assert.match(err.response.data.message, /after 3 attempts/)
      return true
    })
  } finally {
    await nextAnswers({})
  }
  // 3 attempts by the platform for each of the client's own 3 tries.
  const made = (await upstreamRequests()).length - before
  assert.ok(made >= 3 && made <= 9, `${made} upstream calls`)
})

test("another workspace's token is refused and reaches no provider", async () => {
  const second = (await new Client({ apiUrl, token: adminToken }).createWorkspace({ name: 'Elsewhere' })).id
  const inv = await api('POST', '/v1/admin/workspace-members', { headers: { 'x-workspace-id': second }, body: { email: 'outsider@example.com', role: 'developer' } })
  assert.equal(inv.status, 200, JSON.stringify(inv.body))
  const outsider = fs.readFileSync(path.join(dataDir, 'account-tokens', 'outsider@example.com'), 'utf8').trim()
  const before = (await upstreamRequests()).length
  const stranger = new CognitiveBeta({ apiUrl, token: outsider, botId: bot })
  await assert.rejects(stranger.generateText({ messages: [{ role: 'user', content: 'x' }] }), (err) => err.response?.status === 404)
  await assert.rejects(stranger.listModels(), (err) => err.response?.status === 404)
  assert.equal((await upstreamRequests()).length, before)
})

test("what Cognitive needs around it: getBot with the bot's key, a file's url without a token", async () => {
  const { bot: self } = await new Client({ apiUrl, token: botKey }).getBot({ id: bot })
  assert.equal(self.id, bot)
  const content = JSON.stringify({ best: ['openai:llama-test'], fast: [], downtimes: [] })
  const { file } = await botClient.uploadFile({ key: `bot->${bot}->models.config.json`, content })
  const { file: got } = await botClient.getFile({ id: file.id })
  const res = await fetch(got.url) // as Cognitive reads its preferences: no token
  assert.equal(res.status, 200)
  assert.equal(await res.text(), content)
  const tampered = got.url.replace(/signature=[0-9a-f]/, (s) => s.slice(0, -1) + (s.endsWith('0') ? '1' : '0'))
  assert.equal((await fetch(tampered)).status, 401)
})

describe('the integration path: the built-in llm integration installed as openai', () => {
  before(async () => {
    const { integration } = await new Client({ apiUrl, token: adminToken }).getPublicIntegration({ name: 'llm', version: 'latest' })
    assert.equal(integration.interfaces.llm.name, 'llm')
    const r = await api('PUT', `/v1/admin/bots/${bot}`, {
      headers: { 'x-workspace-id': ws, 'x-multiple-integrations': 'true' },
      body: { integrations: { openai: { integrationId: integration.id, enabled: true, configuration: {} } } },
    })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.equal(r.body.bot.integrations.openai.status, 'registered')
  })

  test('plain Cognitive generateContent goes through callAction openai:generateContent', async () => {
    const before = (await upstreamRequests()).length
    const cognitive = new Cognitive({ client: botClient })
    const res = await cognitive.generateContent({
      model: 'openai:small-test',
      systemPrompt: 'integration path',
      messages: [{ role: 'user', type: 'text', content: 'via the action' }],
      temperature: 0.1,
    })
    const sent = (await upstreamRequests()).slice(before)
    assert.equal(sent.length, 1)
    assert.equal(sent[0].body.model, 'small-test')
    assert.deepEqual(sent[0].body.messages, [{ role: 'system', content: 'integration path' }, { role: 'user', content: 'via the action' }])
    assert.equal(res.output.choices[0].content, 'echo: via the action')
    assert.equal(res.meta.model.integration, 'openai')
    assert.equal(res.meta.tokens.output, 4)
  })

  test('plain zai works on it', async () => {
    const zai = new Zai({ client: botClient })
    const text = await zai.text('a limerick')
    assert.equal(text, 'echo: a limerick')
  })

  // A bot written with @botpress/sdk 7.2.4 (sdk-bot.cjs), bundled into one
  // CommonJS file as a build does and deployed as its code: the platform
  // runs it in a worker, its message handler calls openai:generateContent
  // and replies with the model's text.
  test('a deployed SDK 7.2.4 bot answers a user message with the LLM reply', async () => {
    const here = path.dirname(fileURLToPath(import.meta.url))
    const built = buildSync({ entryPoints: [path.join(here, 'sdk-bot.cjs')], bundle: true, platform: 'node', format: 'cjs', write: false, logLevel: 'silent' })
    const code = built.outputFiles[0].text
    const { integration } = await new Client({ apiUrl, token: adminToken }).getPublicIntegration({ name: 'llm', version: 'latest' })
    const sdkBot = (await new Client({ apiUrl, token: adminToken, workspaceId: ws }).createBot({ name: 'sdk-thinker' })).bot.id
    const r = await api('PUT', `/v1/admin/bots/${sdkBot}`, {
      headers: { 'x-workspace-id': ws, 'x-multiple-integrations': 'true' },
      body: { code, integrations: { openai: { integrationId: integration.id, enabled: true, configuration: {} } } },
    })
    assert.equal(r.status, 200, JSON.stringify(r.body))
    assert.ok(r.body.bot.deployedAt, 'deployedAt is set')
    assert.equal(r.body.bot.integrations.openai.status, 'registered')

    const chat = { 'x-bot-id': sdkBot }
    const conv = await api('POST', '/v1/chat/conversations', { headers: chat, body: { channel: 'web', tags: {} } })
    assert.ok(conv.status >= 200 && conv.status < 300, JSON.stringify(conv.body))
    const usr = await api('POST', '/v1/chat/users', { headers: chat, body: { tags: {} } })
    assert.ok(usr.status >= 200 && usr.status < 300, JSON.stringify(usr.body))
    const conversationId = conv.body.conversation.id
    const before = (await upstreamRequests()).length
    const t0 = Date.now()
    const sent = await api('POST', '/v1/chat/messages', {
      headers: chat,
      body: { conversationId, userId: usr.body.user.id, type: 'text', payload: { text: 'what is a deployed bot?' }, tags: {} },
    })
    assert.ok(sent.status >= 200 && sent.status < 300, JSON.stringify(sent.body))
    const reply = await eventually("the bot's reply", async () => {
      const res = await api('GET', `/v1/chat/messages?conversationId=${conversationId}`, { headers: chat })
      return res.body.messages.find((m) => m.userId === sdkBot)
    })
    console.log(`deployed SDK 7.2.4 bot: message to LLM reply (worker cold start included) ${Date.now() - t0} ms`)
    assert.equal(reply.payload.text, 'llm says: echo: what is a deployed bot?')
    const calls = (await upstreamRequests()).slice(before)
    assert.equal(calls.length, 1)
    assert.equal(calls[0].body.model, 'small-test')
    assert.deepEqual(calls[0].body.messages, [
      { role: 'system', content: 'You are a deployed SDK bot.' },
      { role: 'user', content: 'what is a deployed bot?' },
    ])
  })

  test('getModelDetails lists the models of the integration', async () => {
    const cognitive = new Cognitive({ client: botClient })
    const models = await cognitive.fetchInstalledModels()
    assert.deepEqual(models.map((m) => m.ref).sort(), ['openai:llama-test', 'openai:small-test'])
  })
})

test("the operator's token quota: counted per bot, refused with 403 QuotaExceeded before the provider is called", async () => {
  const quota = Number(process.env.LLM_QUOTA)
  const b = (await new Client({ apiUrl, token: adminToken, workspaceId: ws }).createBot({ name: 'spender' })).bot.id
  const spender = new CognitiveBeta({ apiUrl, token: adminToken, botId: b })
  const long = 'word '.repeat(Math.ceil(quota / 2))
  let used = 0
  while (used < quota) {
    const res = await spender.generateText({ messages: [{ role: 'user', content: long }] })
    used += res.metadata.usage.inputTokens + res.metadata.usage.outputTokens
  }
  const before = (await upstreamRequests()).length
  await assert.rejects(spender.generateText({ messages: [{ role: 'user', content: 'one more' }] }), (err) => {
    assert.equal(err.response?.status, 403)
    assert.equal(err.response.data.type, 'QuotaExceeded')
    return true
  })
  assert.equal((await upstreamRequests()).length, before)
  // getBotAnalytics' LLM figures are the counted tokens.
  const day = new Date().toISOString().slice(0, 10)
  const a = await api('GET', `/v1/admin/bots/${b}/analytics?startDate=${day}&endDate=${day}`, { headers: { 'x-workspace-id': ws } })
  assert.equal(a.status, 200, JSON.stringify(a.body))
  const llm = a.body.records[0].llm
  assert.equal(llm.inputTokens + llm.outputTokens, used)
  // The first bot still has room.
  assert.match((await beta.generateText({ messages: [{ role: 'user', content: 'still here' }] })).output, /still here/)
})
