// End users with the REAL official Chat API client (@botpress/chat 0.5.5)
// against the platform's built-in `chat` integration, installed from the
// hub on a bot run by the REAL SDK (@botpress/sdk 7.2.4, fixtures/bot.js,
// which echoes every text). The client is pointed at the installation's
// webhookUrl with Client.connect({apiUrl}) and nothing else.
//
// Connect (new user, then with its key), personal mode (encryptionKey),
// a conversation, listenConversation, a turn with the bot's reply on the
// stream, the stream kept past Node's 5 s idle socket timeout,
// participants, events, deletion, another user refused, reconnecting and
// listing without loss; then 200 turns timed (CHAT_TURNS to change).
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import * as chat from '@botpress/chat'
import { newWorkspace, streamApiUrl } from '../lib/env.mjs'
import { startFixture } from '../lib/runtime.mjs'

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

/** signals collects a listener's signals; next(pred) waits for one. */
function collect(listener) {
  const seen = []
  const waiters = []
  for (const type of ['message_created', 'event_created', 'participant_added', 'participant_removed', 'message_deleted']) {
    listener.on(type, (data) => {
      const s = { type, data, at: performance.now() }
      seen.push(s)
      for (const w of [...waiters]) {
        if (w.pred(s)) {
          waiters.splice(waiters.indexOf(w), 1)
          w.resolve(s)
        }
      }
    })
  }
  return {
    seen,
    next(pred, ms = 10000) {
      const found = seen.find(pred)
      if (found) {
        seen.splice(seen.indexOf(found), 1)
        return Promise.resolve(found)
      }
      return new Promise((resolve, reject) => {
        const w = {
          pred,
          resolve: (s) => {
            clearTimeout(t)
            seen.splice(seen.indexOf(s), 1)
            resolve(s)
          },
        }
        const t = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1)
          reject(new Error(`no matching signal within ${ms} ms; seen: ${JSON.stringify(seen).slice(0, 1500)}`))
        }, ms)
        waiters.push(w)
      })
    },
  }
}

async function expectChatError(promise, status) {
  await assert.rejects(promise, (e) => {
    const got = e.code ?? e.status
    assert.equal(got, status, `expected ${status}, got ${got}: ${e.message}`)
    return true
  })
}

describe('@botpress/chat 0.5.5 against the built-in chat integration', () => {
  let api, bot, botFixture, webhookUrl, chatIntegration

  /** installChat installs the hub's chat integration on a new bot. */
  async function installChat(configuration) {
    const { bot: created } = await api.createBot({ dev: true, url: botFixture.url })
    const { bot: updated } = await api.updateBot({
      id: created.id,
      integrations: { [chatIntegration.id]: { enabled: true, configuration } },
    })
    const install = updated.integrations[chatIntegration.id]
    assert.equal(install.status, 'registered', JSON.stringify(install))
    const { bot: got } = await api.getBot({ id: created.id })
    return { bot: got, webhookUrl: got.integrations[chatIntegration.id].webhookUrl }
  }

  before(async () => {
    ;({ api } = await newWorkspace())
    botFixture = await startFixture('bot.js')
    ;({ integration: chatIntegration } = await api.getPublicIntegration({ name: 'chat', version: 'latest' }))
    ;({ bot, webhookUrl } = await installChat({}))
  })
  after(async () => {
    await botFixture?.stop()
  })

  test('the hub publishes chat; the installation has an absolute webhookUrl', () => {
    assert.equal(chatIntegration.name, 'chat')
    assert.equal(chatIntegration.public, true)
    assert.match(webhookUrl, /^http:\/\/127\.0\.0\.1:\d+\/webhooks\/whk_[0-9A-Za-z]+$/)
  })

  test('connect, a conversation, a turn with the bot\'s reply on the stream, participants, events, deletion', async () => {
    const client = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
    assert.ok(client.user.id && client.user.key)
    // get-or-create with the key: the same user.
    const again = await chat.Client.connect({ apiUrl: webhookUrl, userKey: client.user.key })
    assert.equal(again.user.id, client.user.id)

    const { conversation } = await client.createConversation({})
    const listener = await client.listenConversation({ id: conversation.id })
    const signals = collect(listener)
    let closed = false
    listener.on('error', () => (closed = true))
    listener.on('close', () => (closed = true))

    const { message } = await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'hello' } })
    assert.equal(message.userId, client.user.id)
    const own = await signals.next((s) => s.type === 'message_created' && s.data.id === message.id)
    assert.equal(own.data.isBot, false)
    const reply = await signals.next((s) => s.type === 'message_created' && s.data.isBot)
    assert.deepEqual(reply.data.payload, { type: 'text', text: 'echo: hello' })
    assert.equal(reply.data.conversationId, conversation.id)
    const seenByBot = await botFixture.waitFor((c) => c.op === 'message_created' && c.message.payload.text === 'hello')
    assert.equal(seenByBot.message.type, 'text')

    // Idle past Node's 5 s keep-alive timeout: the stream still delivers.
    await sleep(6500)
    assert.equal(closed, false, 'the stream closed while idle')
    await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'still there?' } })
    await signals.next((s) => s.type === 'message_created' && s.data.isBot && s.data.payload.text === 'echo: still there?')

    // Another user: refused, until added as a participant.
    const other = await chat.Client.connect({ apiUrl: webhookUrl })
    await expectChatError(other.getConversation({ id: conversation.id }), 403)
    await expectChatError(other.listMessages({ conversationId: conversation.id }), 403)
    await expectChatError(other.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'x' } }), 403)
    await client.addParticipant({ conversationId: conversation.id, userId: other.user.id })
    const added = await signals.next((s) => s.type === 'participant_added')
    assert.equal(added.data.participantId, other.user.id)
    const { participants } = await other.listParticipants({ conversationId: conversation.id })
    assert.deepEqual(participants.map((p) => p.id).sort(), [client.user.id, other.user.id].sort())
    assert.equal((await client.getParticipant({ conversationId: conversation.id, userId: other.user.id })).participant.id, other.user.id)
    await client.removeParticipant({ conversationId: conversation.id, userId: other.user.id })
    await signals.next((s) => s.type === 'participant_removed' && s.data.participantId === other.user.id)
    await expectChatError(other.getConversation({ id: conversation.id }), 403)

    // Events.
    const { event } = await client.createEvent({ conversationId: conversation.id, payload: { clicked: 'buy' } })
    const evSig = await signals.next((s) => s.type === 'event_created')
    assert.deepEqual(evSig.data.payload, { clicked: 'buy' })
    assert.equal(evSig.data.isBot, false)
    assert.deepEqual((await client.getEvent({ id: event.id })).event.payload, { clicked: 'buy' })
    await expectChatError(other.getEvent({ id: event.id }), 403)

    // Deletion.
    await client.deleteMessage({ id: message.id })
    const del = await signals.next((s) => s.type === 'message_deleted')
    assert.equal(del.data.id, message.id)
    await expectChatError(client.getMessage({ id: message.id }), 404)
    await listener.disconnect()
    await client.deleteConversation({ id: conversation.id })
    await expectChatError(client.getConversation({ id: conversation.id }), 404)

    // A tampered key.
    const [h, p] = client.user.key.split('.')
    const forged = `${h}.${Buffer.from(JSON.stringify({ id: other.user.id })).toString('base64url')}.${client.user.key.split('.')[2]}`
    await expectChatError(chat.Client.connect({ apiUrl: webhookUrl, userKey: forged }), 401)
    assert.ok(p)
  })

  test('personal mode: the client signs its own key; its user id is the one it chose', async () => {
    const personal = await installChat({ encryptionKey: 'a-secret-of-the-site' })
    const alice = await chat.Client.connect({ apiUrl: personal.webhookUrl, encryptionKey: 'a-secret-of-the-site', userId: 'alice-42' })
    assert.equal(alice.user.id, 'alice-42')
    const again = await chat.Client.connect({ apiUrl: personal.webhookUrl, encryptionKey: 'a-secret-of-the-site', userId: 'alice-42' })
    assert.equal(again.user.createdAt, alice.user.createdAt)
    await expectChatError(chat.Client.connect({ apiUrl: personal.webhookUrl }), 403) // POST /users refused
    await expectChatError(chat.Client.connect({ apiUrl: personal.webhookUrl, encryptionKey: 'wrong', userId: 'alice-42' }), 401)
    // A key of this installation is nothing to another one.
    await expectChatError(chat.Client.connect({ apiUrl: webhookUrl, userKey: alice.user.key }), 401)
    const { conversation } = await alice.getOrCreateConversation({ id: 'order-1001' })
    assert.equal(conversation.id, 'order-1001')
  })

  test('reconnect and list without loss', async () => {
    const first = await chat.Client.connect({ apiUrl: webhookUrl })
    const { conversation } = await first.createConversation({})
    for (const text of ['one', 'two', 'three']) {
      await first.createMessage({ conversationId: conversation.id, payload: { type: 'text', text } })
    }
    // The bot answers while no one listens.
    await botFixture.waitFor((c) => c.op === 'message_created' && c.message.payload.text === 'three')
    const later = await chat.Client.connect({ apiUrl: webhookUrl, userKey: first.user.key })
    let texts = []
    for (let i = 0; i < 100; i++) {
      const { messages } = await later.listMessages({ conversationId: conversation.id })
      texts = messages.map((m) => m.payload.text).sort()
      if (texts.length >= 6) break
      await sleep(50) // the bot's replies are still on their way: poll what is asserted
    }
    assert.deepEqual(texts, ['echo: one', 'echo: three', 'echo: two', 'one', 'three', 'two'])
    const { conversations } = await later.listConversations({})
    assert.ok(conversations.some((c) => c.id === conversation.id))
  })

  // As Botpress's own chat integration (issue 35).

  /** ended resolves when listener's stream ends (its 'error'), with when. */
  function ended(listener) {
    return new Promise((resolve) => {
      listener.on('error', () => resolve(performance.now()))
    })
  }

  test('a removed participant\'s stream ends within a second of the removal; it hears nothing more', async () => {
    const owner = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
    // The removal through the API (on AWS another function than the streams').
    const ownerApi = await chat.Client.connect({ apiUrl: webhookUrl, userKey: owner.user.key })
    const bob = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
    const { conversation } = await owner.createConversation({})
    await owner.addParticipant({ conversationId: conversation.id, userId: bob.user.id })
    const ownerListener = await owner.listenConversation({ id: conversation.id })
    const ownerSignals = collect(ownerListener)
    const bobListener = await bob.listenConversation({ id: conversation.id })
    const bobSignals = collect(bobListener)
    const bobEnded = ended(bobListener)

    await owner.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'before' } })
    await bobSignals.next((s) => s.type === 'message_created' && s.data.isBot && s.data.payload.text === 'echo: before')
    await ownerSignals.next((s) => s.type === 'message_created' && s.data.isBot && s.data.payload.text === 'echo: before')

    const t0 = performance.now()
    await ownerApi.removeParticipant({ conversationId: conversation.id, userId: bob.user.id })
    const answered = performance.now()
    const at = await Promise.race([bobEnded, sleep(1000).then(() => null)])
    assert.ok(at !== null, 'the removed participant\'s stream is still open a second after the removal')
    console.log(`removed participant's stream ended ${(at - answered).toFixed(0)} ms after the removal's answer (${(at - t0).toFixed(0)} ms after its request)`)
    bobSignals.seen.length = 0

    // The conversation goes on for the owner; nothing of it reaches Bob.
    await owner.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'bar' } })
    await ownerSignals.next((s) => s.type === 'message_created' && s.data.isBot && s.data.payload.text === 'echo: bar')
    assert.deepEqual(bobSignals.seen, [])
    await expectChatError(bob.listMessages({ conversationId: conversation.id }), 403)
    await ownerListener.disconnect()
  })

  test('only the owner removes participants; the owner cannot be removed', async () => {
    const owner = await chat.Client.connect({ apiUrl: webhookUrl })
    const bob = await chat.Client.connect({ apiUrl: webhookUrl })
    const carol = await chat.Client.connect({ apiUrl: webhookUrl })
    const { conversation } = await owner.createConversation({})
    for (const u of [bob, carol]) await owner.addParticipant({ conversationId: conversation.id, userId: u.user.id })
    await expectChatError(bob.removeParticipant({ conversationId: conversation.id, userId: carol.user.id }), 403)
    await expectChatError(bob.removeParticipant({ conversationId: conversation.id, userId: owner.user.id }), 403)
    await assert.rejects(owner.removeParticipant({ conversationId: conversation.id, userId: owner.user.id }), (e) => {
      assert.equal(e.code ?? e.status, 400, e.message)
      assert.equal(e.type, 'InvalidPayload', e.message)
      return true
    })
    assert.equal((await owner.getConversation({ id: conversation.id })).conversation.id, conversation.id)
    const { participants } = await owner.listParticipants({ conversationId: conversation.id })
    assert.equal(participants.length, 3)
    await owner.removeParticipant({ conversationId: conversation.id, userId: carol.user.id })
    await expectChatError(carol.getConversation({ id: conversation.id }), 403)
  })

  test('client-chosen ids outside [a-zA-Z0-9_\\-\\\\/]{1,70} are 400 InvalidPayload stating the rule', async () => {
    const rule = (e) => {
      assert.equal(e.code ?? e.status, 400, e.message)
      assert.equal(e.type, 'InvalidPayload', e.message)
      assert.match(e.message, /1 to 70 characters/)
      return true
    }
    const long = 'a'.repeat(71)
    const anon = new chat.Client({ apiUrl: webhookUrl })
    await assert.rejects(anon.createUser({ id: 'invalid+abc' }), rule)
    await assert.rejects(anon.createUser({ id: long }), rule)
    const client = await chat.Client.connect({ apiUrl: webhookUrl })
    for (const id of ['invalid+abc', long]) {
      await assert.rejects(client.createConversation({ id }), rule)
      await assert.rejects(client.getOrCreateConversation({ id }), rule)
    }
    const ok = `order/7\\x_${'b'.repeat(60)}`
    assert.equal(ok.length, 70)
    assert.equal((await client.getOrCreateConversation({ id: ok })).conversation.id, ok)
    assert.equal((await anon.createUser({ id: 'a'.repeat(70) })).user.id, 'a'.repeat(70))
    // Personal mode: a well-signed key of a 123-character id.
    const personal = await installChat({ encryptionKey: 'k-of-the-site' })
    await assert.rejects(chat.Client.connect({ apiUrl: personal.webhookUrl, encryptionKey: 'k-of-the-site', userId: 'x'.repeat(123) }), rule)
  })

  test('custom events: the user\'s reaches the bot as {userId, conversationId, payload}; the bot\'s sendEvent reaches the client as event_created', async () => {
    const client = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
    const { conversation } = await client.createConversation({})
    const listener = await client.listenConversation({ id: conversation.id })
    const signals = collect(listener)
    const marker = `m-${Date.now()}`
    const { event } = await client.createEvent({ conversationId: conversation.id, payload: { clicked: 'buy', marker } })
    assert.deepEqual(event.payload, { clicked: 'buy', marker })
    const got = await botFixture.waitFor((c) => c.op === 'event_received' && c.event.payload?.payload?.marker === marker)
    assert.equal(got.event.type, 'chat:custom')
    assert.deepEqual(got.event.payload, { userId: got.event.userId, conversationId: got.event.conversationId, payload: { clicked: 'buy', marker } })
    await signals.next((s) => s.type === 'event_created' && !s.data.isBot)

    await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'event please' } })
    const sig = await signals.next((s) => s.type === 'event_created' && s.data.isBot)
    assert.deepEqual(sig.data.payload, { from: 'bot', n: 1 })
    assert.equal(sig.data.conversationId, conversation.id)
    assert.equal(sig.data.userId, bot.id)
    await listener.disconnect()
  })

  test('a bloc from the bot arrives on the stream and in listMessages in the client\'s shape, every item type', async () => {
    const client = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
    const { conversation } = await client.createConversation({})
    const listener = await client.listenConversation({ id: conversation.id })
    const signals = collect(listener)
    const unknown = []
    listener.on('unknown', (d) => unknown.push(d))
    await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'bloc please' } })
    const want = {
      type: 'bloc',
      items: [
        { type: 'text', text: 'Hi' },
        { type: 'markdown', markdown: '**Hi**' },
        { type: 'image', imageUrl: 'https://example.com/i.png' },
        { type: 'audio', audioUrl: 'https://example.com/a.mp3' },
        { type: 'video', videoUrl: 'https://example.com/v.mp4' },
        { type: 'file', fileUrl: 'https://example.com/f.pdf', title: 'F' },
        { type: 'location', latitude: 45.5, longitude: -73.6, address: 'Here', title: 'T' },
      ],
    }
    const sig = await signals.next((s) => s.type === 'message_created' && s.data.isBot).catch((e) => {
      throw new Error(`${e.message}; frames the client could not parse: ${JSON.stringify(unknown).slice(0, 1500)}`)
    })
    assert.deepEqual(sig.data.payload, want)
    const { messages } = await client.listMessages({ conversationId: conversation.id })
    assert.deepEqual(messages.find((m) => m.id === sig.data.id)?.payload, want)
    await listener.disconnect()
  })

  test('200 turns: user message -> bot reply on the stream', async () => {
    const turns = Number(process.env.CHAT_TURNS ?? 200)
    // A key may send 20 requests a second (bursts of 100): a new user
    // every 40 turns keeps the loop under its limit.
    const took = []
    let client, conversation, listener, signals
    for (let i = 0; i < turns; i++) {
      if (i % 40 === 0) {
        await listener?.disconnect()
        client = await chat.Client.connect({ apiUrl: streamApiUrl(webhookUrl) })
        ;({ conversation } = await client.createConversation({}))
        listener = await client.listenConversation({ id: conversation.id })
        signals = collect(listener)
      }
      const text = `turn ${i}`
      const t0 = performance.now()
      await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text } })
      const reply = await signals.next((s) => s.type === 'message_created' && s.data.isBot && s.data.payload.text === `echo: ${text}`)
      took.push(reply.at - t0)
      signals.seen.length = 0
    }
    await listener.disconnect()
    took.sort((a, b) => a - b)
    const q = (p) => took[Math.min(took.length - 1, Math.floor(p * took.length))].toFixed(1)
    console.log(`chat turn (createMessage -> bot reply on the stream), ${turns} turns: p50 ${q(0.5)} ms, p99 ${q(0.99)} ms, max ${took.at(-1).toFixed(1)} ms`)
    assert.ok(Number(q(0.5)) < 500, `p50 ${q(0.5)} ms`)
  })
})
