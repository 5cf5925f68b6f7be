// Chat API: conversations, participants, users, messages, events, states
// and tag values of one bot (x-bot-id), through the official client; every
// response validated against the reference (with the specification's
// additions: messageCount, state expiry, getOrCreateConversation's meta).
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

const definition = {
  states: {
    counter: { type: 'conversation', schema: { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] } },
    profile: { type: 'user', schema: { type: 'object' }, expiry: 60000 },
    settings: { type: 'bot', schema: { type: 'object' } },
  },
}

let bot, chat, api

before(async () => {
  ;({ api } = await newWorkspace())
  ;({ bot } = expectValid('createBot', await api.createBot({ name: unique('chat'), ...definition })))
  chat = new Client({ apiUrl, token: adminToken(), botId: bot.id })
})

const ids = (list) => list.map((x) => x.id)

async function newConversation(tags = {}, channel = 'web') {
  return expectValid('createConversation', await chat.createConversation({ channel, tags })).conversation
}

async function newUser(tags = {}) {
  return expectValid('createUser', await chat.createUser({ tags })).user
}

async function newMessage(conversationId, userId, tags = {}) {
  const res = await chat.createMessage({ conversationId, userId, type: 'text', payload: { text: 'hi' }, tags })
  return expectValid('createMessage', res).message
}

describe('chat: conversations', () => {
  test('create, get, update, list, delete', async () => {
    const tag = unique('t')
    const conv = await newConversation({ topic: tag })
    assert.equal(conv.channel, 'web')
    assert.equal(conv.messageCount, 0)
    assert.deepEqual(conv.tags, { topic: tag })
    assert.deepEqual(expectValid('getConversation', await chat.getConversation({ id: conv.id })).conversation, conv)

    const { conversation: updated } = expectValid(
      'updateConversation',
      await chat.updateConversation({ id: conv.id, tags: { lang: 'fr' } }),
    )
    assert.deepEqual(updated.tags, { topic: tag, lang: 'fr' })
    const removed = expectValid('updateConversation', await chat.updateConversation({ id: conv.id, tags: { lang: '' } }))
    assert.deepEqual(removed.conversation.tags, { topic: tag })

    const listed = expectValid('listConversations', await chat.listConversations({ tags: { topic: tag } }))
    assert.deepEqual(ids(listed.conversations), [conv.id])

    expectValid('deleteConversation', await chat.deleteConversation({ id: conv.id }))
    await expectApiError(chat.getConversation({ id: conv.id }), 404, 'ResourceNotFound')
    await expectApiError(chat.deleteConversation({ id: conv.id }), 404, 'ResourceNotFound')
  })

  test('listConversations: every filter, sorting and pagination', async () => {
    const group = unique('g')
    const u = await newUser()
    const made = []
    for (let i = 0; i < 5; i++) {
      made.push(await newConversation({ group, parity: String(i % 2) }, i % 2 ? 'sms' : 'web'))
      await new Promise((r) => setTimeout(r, 2))
    }
    for (const c of [made[1], made[3]]) {
      expectValid('addParticipant', await chat.addParticipant({ id: c.id, userId: u.id }))
    }
    await newMessage(made[4].id, u.id)
    await newMessage(made[4].id, u.id)
    await newMessage(made[3].id, u.id)

    const list = async (q) => ids(expectValid('listConversations', await chat.listConversations({ tags: { group }, ...q })).conversations)
    const newest = ids(made).reverse()
    assert.deepEqual(await list({}), newest)
    assert.deepEqual(await list({ sortDirection: 'asc' }), ids(made))
    assert.deepEqual(await list({ tags: { group, parity: '0' } }), [made[4].id, made[2].id, made[0].id])
    assert.deepEqual(await list({ channel: 'sms' }), [made[3].id, made[1].id])
    assert.deepEqual(await list({ participantIds: [u.id] }), [made[3].id, made[1].id])
    assert.deepEqual(await list({ afterDate: made[1].createdAt, beforeDate: made[3].createdAt }), [made[3].id, made[2].id, made[1].id])
    assert.deepEqual(await list({ minMessageCount: 1 }), [made[4].id, made[3].id])
    assert.deepEqual(await list({ maxMessageCount: 1, minMessageCount: 1 }), [made[3].id])
    assert.deepEqual(await list({ integrationName: 'nope' }), [])

    await chat.updateConversation({ id: made[0].id, tags: { touched: 'yes' } })
    assert.equal((await list({ sortField: 'updatedAt' }))[0], made[0].id)

    // Pages of 2, through nextToken and through the client's collection.
    const seen = []
    let nextToken
    do {
      const page = expectValid('listConversations', await chat.listConversations({ tags: { group }, pageSize: 2, nextToken }))
      assert.ok(page.conversations.length <= 2)
      seen.push(...ids(page.conversations))
      nextToken = page.meta.nextToken
    } while (nextToken)
    assert.deepEqual(seen, newest)
    const collected = await chat.list.conversations({ tags: { group } }).collect()
    assert.deepEqual(ids(collected), newest)
    assert.equal(collected.find((c) => c.id === made[4].id).messageCount, 2)
  })

  test('getOrCreateConversation: one conversation per identity, also under concurrency', async () => {
    const ext = unique('ext')
    const first = expectValid('getOrCreateConversation', await chat.getOrCreateConversation({ channel: 'dm', tags: { ext } }))
    assert.equal(first.meta.created, true)
    const again = expectValid(
      'getOrCreateConversation',
      await chat.getOrCreateConversation({ channel: 'dm', tags: { ext, name: 'Ann' }, discriminateByTags: ['ext'] }),
    )
    assert.equal(again.meta.created, false)
    assert.equal(again.conversation.id, first.conversation.id)
    assert.equal(again.conversation.tags.name, 'Ann')

    const shared = unique('shared')
    const results = await Promise.all(
      Array.from({ length: 20 }, () => chat.getOrCreateConversation({ channel: 'dm', tags: { ext: shared } })),
    )
    results.forEach((r) => expectValid('getOrCreateConversation', r))
    assert.equal(new Set(results.map((r) => r.conversation.id)).size, 1)
    assert.equal(results.filter((r) => r.meta.created).length, 1)

    await expectApiError(
      chat.getOrCreateConversation({ channel: 'dm', tags: { ext }, discriminateByTags: ['missing'] }),
      400,
      'InvalidPayload',
    )
  })
})

describe('chat: participants and users', () => {
  test('participants', async () => {
    const conv = await newConversation()
    const a = await newUser({ name: 'a' })
    const b = await newUser()
    assert.equal(expectValid('addParticipant', await chat.addParticipant({ id: conv.id, userId: a.id })).participant.id, a.id)
    expectValid('addParticipant', await chat.addParticipant({ id: conv.id, userId: b.id }))
    assert.deepEqual(expectValid('getParticipant', await chat.getParticipant({ id: conv.id, userId: a.id })).participant, a)
    assert.deepEqual(ids(expectValid('listParticipants', await chat.listParticipants({ id: conv.id })).participants), [a.id, b.id])
    expectValid('removeParticipant', await chat.removeParticipant({ id: conv.id, userId: a.id }))
    await expectApiError(chat.getParticipant({ id: conv.id, userId: a.id }), 404, 'ResourceNotFound')
    assert.deepEqual(ids(expectValid('listUsers', await chat.listUsers({ conversationId: conv.id })).users), [b.id])
  })

  test('users: create, get, update, list, getOrCreate, delete', async () => {
    const team = unique('team')
    const u1 = expectValid('createUser', await chat.createUser({ tags: { team }, name: 'Ann', pictureUrl: 'https://example.com/a.png' })).user
    const u2 = await newUser({ team })
    assert.deepEqual(expectValid('getUser', await chat.getUser({ id: u1.id })).user, u1)
    const updated = expectValid('updateUser', await chat.updateUser({ id: u1.id, name: null, tags: { lang: 'en' } })).user
    assert.equal(updated.name, undefined)
    assert.deepEqual(updated.tags, { team, lang: 'en' })
    assert.deepEqual(ids(expectValid('listUsers', await chat.listUsers({ tags: { team } })).users), [u2.id, u1.id])
    assert.deepEqual(ids(expectValid('listUsers', await chat.listUsers({ tags: { team }, sortDirection: 'asc' })).users), [u1.id, u2.id])

    const ext = unique('ext')
    const g1 = expectValid('getOrCreateUser', await chat.getOrCreateUser({ tags: { ext }, name: 'Bob' })).user
    const g2 = expectValid('getOrCreateUser', await chat.getOrCreateUser({ tags: { ext } })).user
    assert.equal(g1.id, g2.id)

    expectValid('deleteUser', await chat.deleteUser({ id: u2.id }))
    await expectApiError(chat.getUser({ id: u2.id }), 404, 'ResourceNotFound')
  })
})

describe('chat: messages', () => {
  test('create, get, update, list, getOrCreate, delete; messageCount stays exact', async () => {
    const conv = await newConversation()
    const u = await newUser()
    const m1 = await newMessage(conv.id, u.id, { ext: 'm1' })
    assert.equal(m1.direction, 'outgoing')
    assert.deepEqual(expectValid('getMessage', await chat.getMessage({ id: m1.id })).message, m1)
    const edited = expectValid('updateMessage', await chat.updateMessage({ id: m1.id, tags: { seen: 'yes' }, payload: { text: 'edited' } })).message
    assert.deepEqual(edited.payload, { text: 'edited' })
    assert.deepEqual(edited.tags, { ext: 'm1', seen: 'yes' })

    const incoming = new Client({ apiUrl, token: adminToken(), botId: bot.id, integrationAlias: 'telegram' })
    const m2 = expectValid(
      'createMessage',
      await incoming.createMessage({ conversationId: conv.id, userId: u.id, type: 'text', payload: { text: 'yo' }, tags: {} }),
    ).message
    assert.equal(m2.direction, 'incoming')

    const got = expectValid(
      'getOrCreateMessage',
      await chat.getOrCreateMessage({ conversationId: conv.id, userId: u.id, type: 'text', payload: {}, tags: { ext: 'm1' } }),
    )
    assert.equal(got.message.id, m1.id)

    // 30 parallel creations and the count is exact.
    await Promise.all(Array.from({ length: 30 }, () => newMessage(conv.id, u.id)))
    assert.equal(expectValid('getConversation', await chat.getConversation({ id: conv.id })).conversation.messageCount, 32)
    const listed = expectValid('listMessages', await chat.listMessages({ conversationId: conv.id }))
    assert.equal(listed.messages.length, 20)
    assert.ok(listed.meta.nextToken)
    assert.deepEqual(ids(expectValid('listMessages', await chat.listMessages({ tags: { seen: 'yes' } })).messages), [m1.id])

    expectValid('deleteMessage', await chat.deleteMessage({ id: m1.id }))
    await expectApiError(chat.getMessage({ id: m1.id }), 404, 'ResourceNotFound')
    assert.equal(expectValid('getConversation', await chat.getConversation({ id: conv.id })).conversation.messageCount, 31)

    // Deleting the conversation deletes its messages at once.
    await chat.deleteConversation({ id: conv.id })
    await expectApiError(chat.getMessage({ id: m2.id }), 404, 'ResourceNotFound')
    await expectApiError(chat.listMessages({ conversationId: conv.id }), 404, 'ResourceNotFound')

    await expectApiError(
      chat.createMessage({ conversationId: conv.id, userId: u.id, type: 'text', payload: {}, tags: {} }),
      404,
      'ResourceNotFound',
    )
  })
})

describe('chat: events', () => {
  test('create, get, list, cancel a scheduled one', async () => {
    const conv = await newConversation()
    const type = unique('custom')
    const { event } = expectValid('createEvent', await chat.createEvent({ type, payload: { n: 1 }, conversationId: conv.id }))
    assert.equal(event.status, 'pending')
    assert.equal(event.failureReason, null)
    // The runtime delivers it at once: this bot has no url, so it fails with
    // the reason (docs/runtime.md); everything else is as created.
    const got = expectValid('getEvent', await chat.getEvent({ id: event.id })).event
    assert.deepEqual({ ...got, status: event.status, failureReason: event.failureReason }, event)
    assert.ok(got.status === 'pending' || (got.status === 'failed' && /no url/.test(got.failureReason)), JSON.stringify(got))
    const later = expectValid('createEvent', await chat.createEvent({ type, payload: {}, schedule: { delay: 60000 } })).event
    assert.equal(later.status, 'scheduled')
    assert.deepEqual(ids(expectValid('listEvents', await chat.listEvents({ type })).events), [later.id, event.id])
    assert.deepEqual(ids(expectValid('listEvents', await chat.listEvents({ conversationId: conv.id })).events), [event.id])
    expectValid('cancelScheduledEvent', await chat.cancelScheduledEvent({ id: later.id }))
    assert.equal(expectValid('getEvent', await chat.getEvent({ id: later.id })).event.status, 'canceled')
    await expectApiError(
      chat.createEvent({ type, payload: {}, conversationId: 'conv_01ARZ3NDEKTSV4RRFFQ69G5FAV' }),
      404,
      'ResourceNotFound',
    )
  })
})

describe('chat: states', () => {
  test('set, get, patch, getOrSet, expiry; declarations and schemas are enforced', async () => {
    const conv = await newConversation()
    const u = await newUser()
    const key = { type: 'conversation', id: conv.id, name: 'counter' }
    await expectApiError(chat.getState(key), 404, 'ResourceNotFound')
    const set = expectValid('setState', await chat.setState({ ...key, payload: { n: 1, note: 'a' } })).state
    assert.equal(set.conversationId, conv.id)
    const got = expectValid('getState', await chat.getState(key))
    assert.deepEqual(got.state, set)
    assert.equal(got.meta.cached, false)
    const patched = expectValid('patchState', await chat.patchState({ ...key, payload: { n: 2 } })).state
    assert.deepEqual(patched.payload, { n: 2, note: 'a' })

    // 25 parallel patches of different keys all land.
    await Promise.all(Array.from({ length: 25 }, (_, i) => chat.patchState({ ...key, payload: { [`k${i}`]: i } })))
    assert.equal(Object.keys(expectValid('getState', await chat.getState(key)).state.payload).length, 27)

    const profile = { type: 'user', id: u.id, name: 'profile' }
    const created = expectValid('getOrSetState', await chat.getOrSetState({ ...profile, payload: { lang: 'en' } })).state
    assert.equal(created.expiry, 60000)
    assert.ok(created.expiresAt > created.updatedAt)
    const existing = expectValid('getOrSetState', await chat.getOrSetState({ ...profile, payload: { lang: 'fr' } })).state
    assert.deepEqual(existing.payload, { lang: 'en' })
    const noExpiry = expectValid('setStateExpiry', await chat.setStateExpiry({ ...profile, expiry: null })).state
    assert.equal(noExpiry.expiresAt, undefined)

    expectValid('setState', await chat.setState({ type: 'bot', id: bot.id, name: 'settings', payload: { on: true } }))

    await expectApiError(chat.setState({ ...key, payload: { n: 'one' } }), 400, 'InvalidPayload')
    await expectApiError(chat.setState({ ...key, name: 'undeclared', payload: {} }), 400, 'InvalidPayload')
    await expectApiError(chat.setState({ ...key, type: 'user', payload: {} }), 400, 'InvalidPayload')
    await expectApiError(chat.setState({ ...key, id: 'conv_01ARZ3NDEKTSV4RRFFQ69G5FAV', payload: { n: 1 } }), 404, 'ResourceNotFound')
    assert.equal(expectValid('getState', await chat.getState(key)).state.payload.n, 2)
  })
})

describe('chat: tag values, access', () => {
  test('listTagValues', async () => {
    const name = unique('color')
    for (const v of ['red', 'blue', 'red']) await newUser({ [name]: v })
    const res = expectValid('listTagValues', await chat.listTagValues({ key: name, type: 'user' }))
    assert.deepEqual(
      res.tags.map((t) => t.value),
      ['blue', 'red'],
    )
  })

  test('viewers read and cannot write; another workspace sees nothing', async () => {
    const conv = await newConversation()
    const viewer = await newAccount(api, 'viewer')
    const asViewer = new Client({ apiUrl, token: viewer.token, botId: bot.id })
    expectValid('getConversation', await asViewer.getConversation({ id: conv.id }))
    await expectApiError(asViewer.createConversation({ channel: 'web', tags: {} }), 403, 'Forbidden')
    await expectApiError(asViewer.deleteConversation({ id: conv.id }), 403, 'Forbidden')

    const { api: otherApi } = await newWorkspace()
    const { bot: other } = await otherApi.createBot({ name: unique('other') })
    const elsewhere = new Client({ apiUrl, token: adminToken(), botId: other.id })
    await expectApiError(elsewhere.getConversation({ id: conv.id }), 404, 'ResourceNotFound')
    const outsider = await newAccount(otherApi, 'owner')
    await expectApiError(
      new Client({ apiUrl, token: outsider.token, botId: bot.id }).getConversation({ id: conv.id }),
      404,
      'ResourceNotFound',
    )
  })
})
