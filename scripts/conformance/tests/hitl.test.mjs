// Humans in the loop end to end (docs/hitl.md): a bot on the REAL SDK
// (@botpress/sdk 7.2.4, fixtures/hitl-bot.js, making the hitl plugin's
// calls itself), an end user on the REAL @botpress/chat 0.5.5 through the
// built-in chat integration, and an agent on the platform's agent API,
// the session answered by the built-in hitl integration:
// waiting -> the user's messages shown to the agent and not answered by
// the bot -> assigned (the user is told) -> replies both ways in order ->
// closed by the agent, by /end, and by an assignment timeout -> the bot
// answers again.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as chat from '@botpress/chat'
import { apiUrl, adminToken, newWorkspace, streamApiUrl } from '../lib/env.mjs'
import { startFixture } from '../lib/runtime.mjs'
import { expectValid } from '../lib/schema.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** until polls f until it returns a truthy value (what is asserted). */
async function until(what, f, ms = 20000) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(50)
  }
}

/** agentApi calls the agent API with a member's token. */
function agentApi(ws, token = adminToken()) {
  const base = `${apiUrl}/v1/admin/workspaces/${ws}/hitl/sessions`
  const call = async (method, path, body) => {
    const res = await fetch(base + path, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    })
    const out = await res.json()
    return { status: res.status, body: out }
  }
  const ok = async (method, path, body) => {
    const r = await call(method, path, body)
    assert.equal(r.status, 200, `${method} ${path}: ${r.status} ${JSON.stringify(r.body)}`)
    return r.body
  }
  return { call, ok }
}

describe('humans in the loop: SDK bot, @botpress/chat end user, agent API', () => {
  let api, ws, bot, botFixture, agent, user, conversation, texts, listener

  before(async () => {
    ;({ api, ws } = await newWorkspace())
    botFixture = await startFixture('hitl-bot.js', { env: { HITL_TIMEOUT_MS: '2000' } })
    const { integration: chatInt } = await api.getPublicIntegration({ name: 'chat', version: 'latest' })
    const { integration: hitlInt } = expectValid('getPublicIntegration', await api.getPublicIntegration({ name: 'hitl', version: 'latest' }))
    assert.equal(hitlInt.interfaces.hitl.version, '2.1.0')
    const { bot: created } = await api.createBot({ dev: true, url: botFixture.url })
    const tag = {}
    ;({ bot } = await api.updateBot({
      id: created.id,
      integrations: {
        [chatInt.id]: { enabled: true, configuration: {} },
        [hitlInt.id]: { enabled: true, configuration: {} },
      },
      // What the SDK adds to a bot definition for the plugin (prefixed names).
      states: { 'hitl#hitl': { type: 'conversation', schema: { type: 'object', properties: { hitlActive: { type: 'boolean' } } } } },
      events: { 'hitl#humanAgentAssignedTimeout': { schema: { type: 'object' } } },
      conversation: { tags: { 'hitl#downstream': tag, 'hitl#upstream': tag, 'hitl#humanAgentId': tag } },
      user: { tags: { 'hitl#downstream': tag, 'hitl#upstream': tag } },
    }))
    for (const id of [chatInt.id, hitlInt.id]) assert.equal(bot.integrations[id].status, 'registered')
    agent = agentApi(ws.id)
    user = await chat.Client.connect({ apiUrl: streamApiUrl(bot.integrations[chatInt.id].webhookUrl) })
    ;({ conversation } = await user.createConversation({}))
    listener = await user.listenConversation({ id: conversation.id })
    texts = [] // what the end user sees from the bot, in order
    listener.on('message_created', (m) => {
      if (m.isBot) texts.push(m.payload.text ?? `[${m.payload.type}] ${m.payload.imageUrl ?? ''}`)
    })
  })
  after(async () => {
    await listener?.disconnect()
    await botFixture?.stop()
  })

  const say = (text) => user.createMessage({ conversationId: conversation.id, payload: { type: 'text', text } })
  const sees = (what, pred, ms) => until(`the user sees ${what}`, () => texts.find(pred), ms)
  const waitingSession = (not = []) =>
    until('a waiting session', async () => {
      const { sessions } = await agent.ok('GET', '?status=waiting')
      return sessions.find((s) => s.botId === bot.id && !not.includes(s.id))
    })

  test('handover, assignment, replies both ways in order, closed by the agent: the bot answers again', async () => {
    await say('hello')
    await sees('the bot\'s answer', (t) => t === 'bot: hello')
    await say('human please')
    await sees('the handoff text', (t) => t === 'Transferring you to a human agent...')
    const s = await waitingSession()
    assert.equal(s.title, 'Help wanted')
    const path = `/${s.botId}/${s.id}`

    // The user's messages reach the agent, not the bot's answers.
    await say('are you there?')
    const seen = await until('the agent sees the message', async () => {
      const { transcript } = await agent.ok('GET', path)
      return transcript.some((e) => e.role === 'user' && !e.before && e.payload.text === 'are you there?') && transcript
    })
    // What happened before the handover is in the transcript.
    assert.deepEqual(seen.filter((e) => e.before).map((e) => e.payload.text), ['hello', 'bot: hello', 'human please', 'Transferring you to a human agent...'])

    // Assigned: the user is told.
    const assigned = await agent.ok('POST', `${path}/assign`, {})
    assert.equal(assigned.session.status, 'assigned')
    await sees('that an agent joined', (t) => t === 'A human agent has joined the conversation.')

    // Replies both ways, in order (the agent's three sent back to back,
    // the user's two while they are delivered).
    await agent.ok('POST', `${path}/messages`, { type: 'text', payload: { text: 'Hi, I am Alice' } })
    await sees('the agent\'s reply', (t) => t === 'Hi, I am Alice')
    const agentSays = ['one', 'two', 'three']
    const userSays = ['a', 'b']
    await Promise.all([
      (async () => { for (const t of agentSays) await agent.ok('POST', `${path}/messages`, { type: 'text', payload: { text: t } }) })(),
      (async () => { for (const t of userSays) await say(t) })(),
    ])
    await agent.ok('POST', `${path}/messages`, { type: 'image', payload: { imageUrl: 'https://example.com/cat.png' } })
    await sees('the agent\'s image', (t) => t === '[image] https://example.com/cat.png')
    assert.deepEqual(texts.filter((t) => agentSays.includes(t)), agentSays)
    const { transcript } = await until('the agent sees a and b', async () => {
      const r = await agent.ok('GET', path)
      return r.transcript.filter((e) => e.role === 'user' && userSays.includes(e.payload.text)).length === 2 && r
    })
    assert.deepEqual(transcript.filter((e) => e.role === 'user' && userSays.includes(e.payload.text)).map((e) => e.payload.text), userSays)
    assert.deepEqual(transcript.filter((e) => e.role === 'agent' && e.type === 'text').map((e) => e.payload.text), ['Hi, I am Alice', ...agentSays])
    // The bot answered none of what the user said during the session.
    for (const t of ['are you there?', ...userSays]) assert.ok(!texts.includes(`bot: ${t}`), `the bot answered ${t}`)

    // Closed by the agent: the bot is back.
    const closed = await agent.ok('POST', `${path}/close`)
    assert.equal(closed.session.status, 'closed')
    await sees('the close', (t) => t === 'The agent closed the session. I am back.')
    await say('hello again')
    await sees('the bot again', (t) => t === 'bot: hello again')
    const late = await agent.call('POST', `${path}/messages`, { type: 'text', payload: { text: 'too late' } })
    assert.equal(late.status, 409)
    assert.match(late.body.message, /closed/)
  })

  test('closed by /end: the bot answers again', async () => {
    const before = (await agent.ok('GET', '')).sessions.map((s) => s.id)
    await say('human please')
    const s = await waitingSession(before)
    await say('/end')
    await sees('the end', (t) => t === 'You ended the session. I am back.')
    const { session, transcript } = await agent.ok('GET', `/${s.botId}/${s.id}`)
    assert.equal(session.status, 'closed')
    assert.equal(session.closedBy, 'bot')
    assert.ok(transcript.some((e) => e.role === 'bot' && e.payload.text === '( The user has ended the session. )'))
    await say('ping')
    await sees('the bot again', (t) => t === 'bot: ping')
  })

  test('closed by an assignment timeout: the bot answers again', async () => {
    const before = (await agent.ok('GET', '')).sessions.map((s) => s.id)
    await say('human please quick')
    const s = await waitingSession(before)
    await sees('the timeout', (t) => t === 'No agent could take your conversation. I am back.', 90000)
    const { session } = await agent.ok('GET', `/${s.botId}/${s.id}`)
    assert.equal(session.status, 'closed')
    assert.equal(session.closedBy, 'bot')
    await say('pong')
    await sees('the bot again', (t) => t === 'bot: pong')
  })
})
