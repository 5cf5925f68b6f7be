// Tasks (through fetch: @botpress/client 1.45 has no task operations, the
// reference 1.70.2 does), listActivities, audit records, knowledge bases,
// importMessages and usage counters, with the official client where it has
// the operation; every response validated against the reference.
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

let ws, api, bot, chat

before(async () => {
  ;({ ws, api } = await newWorkspace())
  ;({ bot } = expectValid('createBot', await api.createBot({ name: unique('tkb') })))
  chat = new Client({ apiUrl, token: adminToken(), botId: bot.id })
})

/** call sends a Chat request for the bot, as the official client would. */
async function call(method, path, body, { token = adminToken(), botId = bot.id } = {}) {
  const res = await fetch(apiUrl + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'x-bot-id': botId, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  return { status: res.status, body: await res.json() }
}

describe('tasks', () => {
  test('create, get, list, update, activities, delete; bad input and tenancy', async () => {
    const { conversation } = await chat.createConversation({ channel: 'web', tags: {} })
    const created = await call('POST', '/v1/chat/tasks', { type: 'handoff', title: 'Help', conversationId: conversation.id, data: { n: 1 }, tags: { k: 'v' } })
    assert.equal(created.status, 201, JSON.stringify(created.body))
    const { task } = expectValid('createTask', created.body)
    assert.equal(task.status, 'pending')

    const got = await call('GET', `/v1/chat/tasks/${task.id}`)
    assert.deepEqual(expectValid('getTask', got.body).task, task)
    const listed = await call('GET', `/v1/chat/tasks?type=handoff&tags.k=v&status=pending`)
    assert.deepEqual(expectValid('listTasks', listed.body).tasks.map((t) => t.id), [task.id])

    const updated = await call('PUT', `/v1/chat/tasks/${task.id}`, { status: 'completed', description: 'done' })
    assert.equal(updated.status, 200)
    assert.equal(expectValid('updateTask', updated.body).task.status, 'completed')
    assert.equal((await call('PUT', `/v1/chat/tasks/${task.id}`, { status: 'pending' })).status, 400)

    const acts = expectValid('listActivities', await api.listActivities({ botId: bot.id, taskId: task.id }))
    assert.deepEqual(acts.activities.map((a) => a.data.to), ['completed', 'pending'])
    assert.ok(acts.activities.every((a) => a.category === 'task_status' && a.taskId === task.id))

    for (const bad of [{ conversationId: conversation.id }, { type: 'x' }, { type: 'x', conversationId: conversation.id, timeoutAt: 'soon' }]) {
      const r = await call('POST', '/v1/chat/tasks', bad)
      assert.equal(r.status, 400, JSON.stringify(r.body))
    }
    assert.equal((await call('POST', '/v1/chat/tasks', { type: 'x', conversationId: 'conv_01ARZ3NDEKTSV4RRFFQ69G5FAV' })).status, 404)
    assert.equal(expectValid('listTasks', (await call('GET', '/v1/chat/tasks')).body).tasks.length, 1)

    const { bot: other } = await api.createBot({ name: unique('other') })
    assert.equal((await call('GET', `/v1/chat/tasks/${task.id}`, null, { botId: other.id })).status, 404)
    await expectApiError(api.listActivities({ botId: other.id, taskId: task.id }), 404, 'ResourceNotFound')

    const del = await call('DELETE', `/v1/chat/tasks/${task.id}`)
    assert.equal(del.status, 200)
    expectValid('deleteTask', del.body)
    assert.equal((await call('GET', `/v1/chat/tasks/${task.id}`)).status, 404)
  })
})

describe('audit records', () => {
  test('admin writes are recorded newest first; a viewer may not read them', async () => {
    const { ws: w, api: a } = await newWorkspace()
    const { bot: b } = await a.createBot({ name: unique('audited') })
    await a.updateBot({ id: b.id, tags: { x: 'y' } })
    const first = expectValid('getAuditRecords', await a.getAuditRecords({ id: w.id }))
    assert.deepEqual(first.records.map((r) => r.action), ['UPDATE_BOT', 'CREATE_BOT', 'CREATE_WORKSPACE'])
    assert.equal(first.records[0].resourceId, b.id)
    assert.equal(first.records[0].value, 'updateBot')
    assert.equal(first.records[0].userEmail, 'admin@localhost')
    const page = expectValid('getAuditRecords', await a.getAuditRecords({ id: w.id, nextToken: undefined }))
    assert.equal(page.records.length, 3)
    await expectApiError(a.createBot({ name: 3 }), 400)
    assert.equal(expectValid('getAuditRecords', await a.getAuditRecords({ id: w.id })).records.length, 3)
    const { token } = await newAccount(a, 'viewer')
    await expectApiError(new Client({ apiUrl, token, workspaceId: w.id }).getAuditRecords({ id: w.id }), 403, 'Forbidden')
  })
})

describe('knowledge bases', () => {
  test('create, list, update, search within one, delete with its files', async () => {
    const kb = expectValid('createKnowledgeBase', await chat.createKnowledgeBase({ name: 'Docs', tags: { team: 'a' } })).knowledgeBase
    assert.equal(kb.name, 'Docs')
    const listed = expectValid('listKnowledgeBases', await chat.listKnowledgeBases({}))
    assert.ok(listed.knowledgeBases.some((k) => k.id === kb.id && k.createdAt))
    const up = expectValid('updateKnowledgeBase', await chat.updateKnowledgeBase({ id: kb.id, name: 'Manual', tags: { team: null, lang: 'en' } }))
    assert.deepEqual(up.knowledgeBase.tags, { lang: 'en' })

    const { file } = await chat.uploadFile({ key: unique('kb') + '.txt', content: 'The pricing is monthly.', index: true, tags: { kbId: kb.id } })
    await chat.uploadFile({ key: unique('loose') + '.txt', content: 'pricing elsewhere', index: true })
    const found = expectValid('searchFiles', await chat.searchFiles({ query: 'pricing', tags: { kbId: kb.id } }))
    assert.deepEqual(found.passages.map((p) => p.file.id), [file.id])

    await expectApiError(chat.createKnowledgeBase({}), 400)
    expectValid('deleteKnowledgeBase', await chat.deleteKnowledgeBase({ id: kb.id }))
    await expectApiError(chat.getFile({ id: file.id }), 404, 'ResourceNotFound')
    await expectApiError(chat.deleteKnowledgeBase({ id: kb.id }), 404, 'ResourceNotFound')
  })
})

describe('importMessages', () => {
  test('creates past messages, finds those already there; a missing conversation writes nothing', async () => {
    const { conversation } = await chat.createConversation({ channel: 'web', tags: {} })
    const { user } = await chat.createUser({ tags: {} })
    const m = { conversationId: conversation.id, userId: user.id, type: 'text', payload: { text: 'old' }, tags: { ext: '1' }, createdAt: '2024-01-01T00:00:00.000Z', discriminateByTags: ['ext'] }
    const first = expectValid('importMessages', await chat.importMessages({ messages: [m] }))
    assert.equal(first.messages[0].createdAt, '2024-01-01T00:00:00.000Z')
    const again = expectValid('importMessages', await chat.importMessages({ messages: [m] }))
    assert.equal(again.messages[0].id, first.messages[0].id)
    await expectApiError(chat.importMessages({ messages: [m, { ...m, conversationId: 'conv_01ARZ3NDEKTSV4RRFFQ69G5FAV' }] }), 404, 'ResourceNotFound')
    const { messages } = await chat.listMessages({ conversationId: conversation.id })
    assert.equal(messages.length, 1)
  })
})

describe('usage', () => {
  test('file storage is counted in bytes', async () => {
    const { bot: b } = await api.createBot({ name: unique('usage') })
    const c = new Client({ apiUrl, token: adminToken(), botId: b.id })
    await c.uploadFile({ key: 'a.txt', content: '12345' })
    const u = expectValid('getUsage', await api.getUsage({ id: b.id, type: 'storage_count' }))
    assert.equal(u.usage.value, 5)
    expectValid('getUsage', await api.getUsage({ id: ws.id, type: 'invocation_calls' }))
  })
})
