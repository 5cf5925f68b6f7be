// assistant.js: the assistant bot the platform ships (docs/assistant.md).
//
// Ordinary bot code on the official SDK (@botpress/sdk 7.2.4, plain
// JavaScript: no CLI codegen, so `plugins: {}`), bundled into one CommonJS
// file by scripts/assistant/build.mjs (shared/assistant/bot.cjs, embedded
// in the platform's binary) and deployed with updateBot like any bot's
// code, so it runs the same way in the local worker and in a Lambda
// function. Its settings are the bot's configuration (configuration.data),
// which the platform sends with every event: an edit applies to the next
// message.
//
// Each user message: search the knowledge base (searchFiles), send the
// best passages, the recent history and the instructions to the model
// through the platform's cognitive API, reply with the answer (and its
// sources), and write one `assistant.turn {json}` line to the bot's log
// with the passages it used (the console's emulator reads it back:
// /work/notes/assistant-contract.md, docs/assistant.md).
const bpclient = require('@botpress/client')
// The registry here lacks @botpress/client 2.5.0, which the SDK pins; 1.45.0
// exports the SDK's retry helper under another name.
if (!bpclient.http) bpclient.http = { isNetworkOrIdempotentRequestError: bpclient.axiosRetry.isNetworkOrIdempotentRequestError }
const sdk = require('@botpress/sdk')

// The settings' defaults, shared with the platform's binary (shared/assistant
// embeds the same file).
const DEFAULTS = require('./defaults.json')

const NO_MODEL =
  "I can't answer yet: no language model is configured on this platform. Its operator must set PLATFORM_LLM_URL " +
  '(an OpenAI-compatible endpoint: OpenAI, vLLM, Ollama).'
const LLM_FAILED = 'Sorry, the language model could not answer just now. Please try again in a moment.'
const HANDOVER = 'Transferring you to a human agent...'
const HANDOVER_UNAVAILABLE = 'No human agent can be reached from here, sorry.'
// The model says it cannot answer with this exact word (the system
// prompt asks it to), which the bot turns into the fallback or a handover.
const CANNOT = 'CANNOT_ANSWER'
// A user asking for a person.
const ASKS_HUMAN = /\b(human|real person|an agent|a person|someone real|talk to (a|an) (agent|operator))\b/i
// One log line at most (the platform cuts a log message at 8 KiB).
const MAX_TURN_LINE = 7000
// The model's context, in tokens, when /v2/cognitive/models does not say;
// and the estimate the platform itself uses: 4 bytes a token.
const DEFAULT_WINDOW = 8192
const BYTES_PER_TOKEN = 4

// settings merges the bot's configuration.data over the defaults, bounding
// the numbers (a setting of the wrong type is ignored, not fatal).
function settings(ctx) {
  let data = {}
  try {
    const p = ctx.configuration && ctx.configuration.payload
    data = typeof p === 'string' ? JSON.parse(p || '{}') : p || {}
  } catch {}
  const s = { ...DEFAULTS }
  const str = (k) => typeof data[k] === 'string' && data[k].trim() !== '' && (s[k] = data[k])
  const num = (k, lo, hi, int) => {
    const v = Number(data[k])
    if (data[k] !== undefined && data[k] !== null && data[k] !== '' && Number.isFinite(v)) s[k] = Math.min(hi, Math.max(lo, int ? Math.round(v) : v))
  }
  const bool = (k) => typeof data[k] === 'boolean' && (s[k] = data[k])
  str('instructions'), str('model'), str('fallbackMessage'), str('hitlAlias')
  num('temperature', 0, 2), num('maxTokens', 1, 32000, true), num('passages', 1, 20, true), num('historyMessages', 0, 50, true)
  bool('citeSources'), bool('handover')
  if (Array.isArray(data.kbIds)) s.kbIds = data.kbIds.filter((x) => typeof x === 'string' && x)
  if (data.fileTags && typeof data.fileTags === 'object' && !Array.isArray(data.fileTags)) {
    s.fileTags = Object.fromEntries(Object.entries(data.fileTags).filter(([, v]) => typeof v === 'string' || Array.isArray(v)))
  }
  return s
}

// api calls the platform with the bot's own key (the worker's BP_TOKEN) for
// what the SDK's client 1.45 does not cover: the cognitive API (v2) and a
// search with an "any of these knowledge bases" tag filter.
async function api(method, path, botId, body) {
  const res = await fetch(new URL(path, process.env.BP_API_URL), {
    method,
    headers: { authorization: `Bearer ${process.env.BP_TOKEN}`, 'x-bot-id': botId, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const text = await res.text()
  let json = {}
  try {
    json = JSON.parse(text)
  } catch {}
  if (!res.ok) {
    const err = new Error(json.message || `${method} ${path}: ${res.status} ${text.slice(0, 200)}`)
    err.status = res.status
    err.type = json.type
    throw err
  }
  return json
}

async function search(botId, s, query) {
  const q = new URLSearchParams({ query, limit: String(s.passages), contextDepth: '0', includeBreadcrumb: 'true' })
  const tags = { ...s.fileTags }
  if (s.kbIds.length) tags.kbId = s.kbIds.length === 1 ? s.kbIds[0] : s.kbIds
  if (Object.keys(tags).length) q.set('tags', JSON.stringify(tags))
  const { passages = [] } = await api('GET', `/v1/files/search?${q}`, botId)
  return passages.slice(0, s.passages).map((p) => ({
    fileId: p.file && p.file.id,
    fileKey: p.file && p.file.key,
    score: p.score,
    content: p.content,
  }))
}

// windowOf is the model's context in tokens (GET /v2/cognitive/models),
// remembered per model for the worker's life.
const windows = new Map()
async function windowOf(botId, model) {
  if (windows.has(model)) return windows.get(model)
  let w = DEFAULT_WINDOW
  try {
    const { models = [] } = await api('GET', '/v2/cognitive/models', botId)
    const m = models.find((x) => x.id === model || (x.aliases || []).includes(model)) || models[0]
    if (m && m.input && m.input.maxTokens > 0) w = m.input.maxTokens
  } catch {}
  windows.set(model, w)
  return w
}

const tokens = (s) => Math.ceil(Buffer.byteLength(s, 'utf8') / BYTES_PER_TOKEN)
const baseName = (key) => String(key || '').split('/').pop()

// prompt builds the messages: the instructions and the passages as the
// system message, then the history (oldest first) and the question, the
// oldest history dropped first until everything fits the model's window
// less the reply's room.
function prompt(s, passages, history, question, window) {
  const context = passages.length
    ? passages.map((p, i) => `[${i + 1}] (${baseName(p.fileKey)})\n${p.content}`).join('\n\n')
    : '(no passage was found)'
  const system =
    `${s.instructions}\n\n` +
    `If the passages below do not contain the answer, reply with exactly ${CANNOT} and nothing else.\n\n` +
    `Passages from the documents:\n${context}`
  let budget = window - s.maxTokens - tokens(system) - tokens(question) - 16
  const kept = []
  for (let i = history.length - 1; i >= 0 && budget > 0; i--) {
    const t = tokens(history[i].content) + 4
    if (t > budget) break
    budget -= t
    kept.unshift(history[i])
  }
  // The kept history starts with a user's message, as chat models expect.
  while (kept.length && kept[0].role !== 'user') kept.shift()
  return [{ role: 'system', content: system }, ...kept, { role: 'user', content: question }]
}

// history is the conversation's recent text messages before this one,
// oldest first, as chat roles; answered says whether a reply to this
// message is there already (a delivery retried after a timeout: answered
// once, not twice).
async function history(client, conversationId, before, limit) {
  const out = []
  let answered = false
  let nextToken
  do {
    const r = await client.listMessages({ conversationId, nextToken })
    for (const m of r.messages) {
      if (m.tags && m.tags.assistantTurn === before.id) answered = true
      if (m.id === before.id) continue
      if (new Date(m.createdAt) > new Date(before.createdAt)) continue
      const text = m.payload && typeof m.payload.text === 'string' ? m.payload.text : ''
      if (!text) continue
      out.push({ role: m.direction === 'incoming' ? 'user' : 'assistant', content: text, at: m.createdAt })
    }
    nextToken = r.meta && r.meta.nextToken
  } while (nextToken && out.length < limit)
  out.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0))
  return { answered, messages: limit ? out.slice(-limit).map(({ role, content }) => ({ role, content })) : [] }
}

// turnLine is the log line the emulator reads back, cut to fit one log
// message (passage contents shortened first).
function turnLine(turn) {
  const t = { ...turn, passages: (turn.passages || []).map((p) => ({ ...p })) }
  let line = 'assistant.turn ' + JSON.stringify(t)
  for (let room = 1200; Buffer.byteLength(line) > MAX_TURN_LINE && room >= 50; room = Math.floor(room / 2)) {
    for (const p of t.passages) if (p.content && p.content.length > room) p.content = p.content.slice(0, room) + '…'
    line = 'assistant.turn ' + JSON.stringify(t)
  }
  if (Buffer.byteLength(line) > MAX_TURN_LINE) {
    t.passages = t.passages.map(({ content, ...rest }) => rest)
    t.query = String(t.query).slice(0, 500)
    line = 'assistant.turn ' + JSON.stringify(t)
  }
  return line
}

async function typing(client, conversation) {
  if (!conversation.integration) return
  try {
    await client.callAction({
      type: `${conversation.integration}:startTypingIndicator`,
      input: { conversationId: conversation.id },
    })
  } catch {} // a channel without typing
}

// --- Handover to a human (the hitl plugin's calls, as
// scripts/conformance/fixtures/hitl-bot.js makes them; docs/hitl.md) ---
const P = 'hitl#'

async function hitlActive(client, conversationId) {
  try {
    const { state } = await client.getState({ type: 'conversation', id: conversationId, name: `${P}hitl` })
    return state.payload.hitlActive === true
  } catch {
    return false
  }
}

async function setHitl(client, ids, hitlActive) {
  for (const id of ids) await client.setState({ type: 'conversation', id, name: `${P}hitl`, payload: { hitlActive } })
}

async function startHitl(client, ctx, s, conversation, userId, reason) {
  const alias = s.hitlAlias
  const { user } = await client.getUser({ id: userId })
  let downstreamUser = user.tags[`${P}downstream`]
  if (!downstreamUser) {
    const { output } = await client.callAction({ type: `${alias}:createUser`, input: { name: user.name || 'End user', email: 'noreply@example.com' } })
    downstreamUser = output.userId
    await client.updateUser({ id: userId, tags: { [`${P}downstream`]: downstreamUser } })
    await client.updateUser({ id: downstreamUser, tags: { [`${P}upstream`]: userId } })
  }
  const { messages } = await client.listMessages({ conversationId: conversation.id })
  const messageHistory = messages
    .reverse()
    .filter((m) => m.type === 'text' && m.payload.text)
    .map((m) => ({
      source: m.direction === 'incoming' ? { type: 'user', userId: downstreamUser } : { type: 'bot' },
      type: 'text',
      payload: { text: m.payload.text },
    }))
  const { output } = await client.callAction({
    type: `${alias}:startHitl`,
    input: { userId: downstreamUser, title: 'Assistant handover', description: reason, messageHistory },
  })
  const downstream = output.conversationId
  await client.updateConversation({ id: conversation.id, tags: { [`${P}downstream`]: downstream, [`${P}humanAgentId`]: '' } })
  await client.updateConversation({ id: downstream, tags: { [`${P}upstream`]: conversation.id } })
  await setHitl(client, [conversation.id, downstream], true)
}

// hitlMessage handles a message while a handover is on, or from the agent's
// side; it answers whether it did.
async function hitlMessage(client, ctx, s, message, conversation) {
  if (conversation.integration === s.hitlAlias) {
    if (!(await hitlActive(client, conversation.id))) return true
    const upstream = conversation.tags[`${P}upstream`]
    if (!conversation.tags[`${P}humanAgentId`]) {
      await client.updateConversation({ id: conversation.id, tags: { [`${P}humanAgentId`]: message.userId } })
      await client.updateConversation({ id: upstream, tags: { [`${P}humanAgentId`]: message.userId } })
    }
    const { userId, ...payload } = message.payload
    await client.createMessage({ conversationId: upstream, userId: ctx.botId, type: message.type, payload, tags: { [`${P}downstream`]: message.id } })
    return true
  }
  if (!(await hitlActive(client, conversation.id))) return false
  const downstream = conversation.tags[`${P}downstream`]
  const text = (message.payload.text || '').trim().toLowerCase()
  if (text === '/end') {
    await client.createMessage({ conversationId: downstream, userId: ctx.botId, type: 'text', tags: {}, payload: { text: '( The user has ended the session. )' } })
    await setHitl(client, [conversation.id, downstream], false)
    await client.callAction({ type: `${s.hitlAlias}:stopHitl`, input: { conversationId: downstream } })
    await client.createMessage({ conversationId: conversation.id, userId: ctx.botId, type: 'text', tags: {}, payload: { text: 'You ended the session. I am back.' } })
    return true
  }
  const downstreamUser = (await client.getUser({ id: message.userId })).user.tags[`${P}downstream`]
  await client.createMessage({ conversationId: downstream, userId: ctx.botId, type: message.type,
    payload: { ...message.payload, userId: downstreamUser }, tags: { [`${P}upstream`]: message.id } })
  return true
}

const bot = new sdk.Bot({ actions: {}, plugins: {} })

bot.on.message('*', async ({ message, conversation, client, ctx }) => {
  const s = settings(ctx)
  if (s.handover && (await hitlMessage(client, ctx, s, message, conversation))) return

  const question = typeof message.payload.text === 'string' ? message.payload.text.trim() : ''
  if (!question) return // a file, an image, a button's postback: nothing to answer
  const turn = { conversationId: conversation.id, messageId: message.id, status: 'answered', query: question, passages: [] }
  const reply = async (text, status) => {
    turn.status = status
    const { message: sent } = await client.createMessage({
      conversationId: conversation.id,
      userId: ctx.botId,
      type: 'text',
      payload: { text },
      tags: { assistant: status, assistantTurn: message.id },
    })
    turn.replyId = sent.id
  }
  const handover = async (reason) => {
    try {
      await reply(HANDOVER, 'handover')
      await startHitl(client, ctx, s, conversation, message.userId, reason)
    } catch (e) {
      turn.error = `handover failed: ${e.message}`
      await reply(HANDOVER_UNAVAILABLE, 'handover')
    }
  }

  await typing(client, conversation)
  try {
    if (s.handover && ASKS_HUMAN.test(question)) return await handover('The user asked for a human.')
    const past = await history(client, conversation.id, message, s.historyMessages)
    if (past.answered) {
      turn.status = 'repeat'
      return
    }
    turn.passages = await search(ctx.botId, s, question)
    const messages = prompt(s, turn.passages, past.messages, question, await windowOf(ctx.botId, s.model))
    const t0 = Date.now()
    let out
    try {
      out = await api('POST', '/v2/cognitive/generate-text', ctx.botId, {
        model: s.model,
        temperature: s.temperature,
        maxTokens: s.maxTokens,
        messages,
        meta: { conversationId: conversation.id, promptSource: 'assistant' },
      })
    } catch (e) {
      turn.llmCallMs = Date.now() - t0
      turn.error = e.message
      // No provider configured: the cognitive API's 403 names PLATFORM_LLM_URL.
      if (e.status === 403 && /PLATFORM_LLM_URL/.test(e.message)) return await reply(NO_MODEL, 'no-model')
      return await reply(LLM_FAILED, 'llm-error')
    }
    turn.llmCallMs = Date.now() - t0
    turn.model = out.metadata && out.metadata.model
    const answer = String(out.output || '').trim()
    if (!answer || answer.includes(CANNOT)) {
      if (s.handover) return await handover('The assistant could not answer: ' + question)
      return await reply(s.fallbackMessage, 'fallback')
    }
    let text = answer
    if (s.citeSources && turn.passages.length) {
      const names = [...new Set(turn.passages.map((p) => baseName(p.fileKey)).filter(Boolean))]
      text += `\n\nSources: ${names.join(', ')}`
    }
    await reply(text, 'answered')
  } finally {
    // The reply itself ends the typing dots (docs/webchat-api.md): no
    // stopTypingIndicator call.
    if (turn.status !== 'repeat') console.log(turnLine(turn))
  }
})

// The handover's events (docs/hitl.md): an agent assigned, the session
// closed by the agent.
bot.on.event('*', async ({ event, client, ctx }) => {
  const s = settings(ctx)
  if (!s.handover) return
  if (event.type === `${s.hitlAlias}:hitlAssigned`) {
    const { conversation } = await client.getConversation({ id: event.payload.conversationId })
    const upstream = conversation.tags[`${P}upstream`]
    await client.updateConversation({ id: conversation.id, tags: { [`${P}humanAgentId`]: event.payload.userId } })
    await client.updateConversation({ id: upstream, tags: { [`${P}humanAgentId`]: event.payload.userId } })
    await client.createMessage({ conversationId: upstream, userId: ctx.botId, type: 'text', tags: {}, payload: { text: 'A human agent has joined the conversation.' } })
  } else if (event.type === `${s.hitlAlias}:hitlStopped`) {
    const { conversation } = await client.getConversation({ id: event.payload.conversationId })
    const upstream = conversation.tags[`${P}upstream`]
    if (!(await hitlActive(client, upstream))) return
    await setHitl(client, [upstream, conversation.id], false)
    await client.createMessage({ conversationId: upstream, userId: ctx.botId, type: 'text', tags: {}, payload: { text: 'The agent closed the session. I am back.' } })
  }
})

module.exports = { default: bot, handler: bot.handler }
