// Bot API keys: listBotApiKeys, createBotApiKey, deleteBotApiKey; what a
// bot API key may do as a token.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, isApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

// expectRevoked waits for a deleted token's call to answer 401: at once on
// the local platform (one process), within 2 s on the AWS build, where
// another function or instance may still hold the token it read
// (docs/security.md, "Revocation bound").
async function expectRevoked(call) {
  const deadline = Date.now() + 2500
  for (;;) {
    try {
      await call()
    } catch (e) {
      if (isApiError(e) && e.code === 401) return
      throw e
    }
    if (Date.now() > deadline) assert.fail('a deleted token still works 2.5 s after its deletion')
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe('bot API keys', () => {
  test('create, list, use, delete; a deleted key stops working', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    assert.deepEqual(expectValid('listBotApiKeys', await api.listBotApiKeys({ botId: bot.id })).baks, [])

    const note = unique('key')
    const key = expectValid('createBotApiKey', await api.createBotApiKey({ botId: bot.id, note }))
    assert.equal(key.note, note)
    assert.ok(key.value)

    const list = expectValid('listBotApiKeys', await api.listBotApiKeys({ botId: bot.id }))
    assert.equal(list.baks.length, 1)
    assert.equal(list.baks[0].id, key.id)
    assert.equal(list.baks[0].note, note)
    assert.equal(list.baks[0].createdAt, key.createdAt)
    assert.equal(list.baks[0].value, undefined, 'a listed key carries no value')

    const asBot = client({ token: key.value, workspaceId: ws.id })
    const got = expectValid('getBot', await asBot.getBot({ id: bot.id }))
    assert.equal(got.bot.id, bot.id)

    expectValid('deleteBotApiKey', await api.deleteBotApiKey({ id: key.id }))
    assert.deepEqual(expectValid('listBotApiKeys', await api.listBotApiKeys({ botId: bot.id })).baks, [])
    await expectRevoked(() => asBot.getBot({ id: bot.id }))
    await expectApiError(asBot.getBot({ id: bot.id }), 401, 'Unauthorized')
    await expectApiError(api.deleteBotApiKey({ id: key.id }), 404, 'ResourceNotFound')
  })

  test('keys are listed per bot, oldest first', async () => {
    const { api } = await newWorkspace()
    const { bot: a } = expectValid('createBot', await api.createBot({}))
    const { bot: b } = expectValid('createBot', await api.createBot({}))
    const k1 = expectValid('createBotApiKey', await api.createBotApiKey({ botId: a.id, note: 'one' }))
    const k2 = expectValid('createBotApiKey', await api.createBotApiKey({ botId: a.id, note: 'two' }))
    const k3 = expectValid('createBotApiKey', await api.createBotApiKey({ botId: b.id, note: 'three' }))
    const la = expectValid('listBotApiKeys', await api.listBotApiKeys({ botId: a.id }))
    assert.deepEqual(new Set(la.baks.map((k) => k.id)), new Set([k1.id, k2.id]))
    const created = la.baks.map((k) => k.createdAt)
    assert.deepEqual(created, [...created].sort())
    const lb = expectValid('listBotApiKeys', await api.listBotApiKeys({ botId: b.id }))
    assert.deepEqual(
      lb.baks.map((k) => k.id),
      [k3.id],
    )
  })

  test('a bot API key reaches its own bot only: another bot is 403, whatever the id', async () => {
    const { ws, api } = await newWorkspace()
    const { bot: mine } = expectValid('createBot', await api.createBot({}))
    const { bot: sibling } = expectValid('createBot', await api.createBot({}))
    const { ws: otherWs, api: other } = await newWorkspace()
    const { bot: foreign } = expectValid('createBot', await other.createBot({}))
    const key = expectValid('createBotApiKey', await api.createBotApiKey({ botId: mine.id, note: 'scoped' }))

    const asBot = client({ token: key.value, workspaceId: ws.id })
    expectValid('getBot', await asBot.getBot({ id: mine.id }))
    // Without x-workspace-id (the SDK's client sends none): the key's own.
    expectValid('getBot', await client({ token: key.value }).getBot({ id: mine.id }))
    // A bot of the same workspace, of another workspace, or none: the same
    // 403 (no oracle; @botpress/cognitive takes it as "use the defaults").
    await expectApiError(asBot.getBot({ id: sibling.id }), 403, 'Forbidden')
    await expectApiError(asBot.getBot({ id: foreign.id }), 403, 'Forbidden')
    await expectApiError(asBot.getBot({ id: 'undefined' }), 403, 'Forbidden')
    const elsewhere = client({ token: key.value, workspaceId: otherWs.id })
    await expectApiError(elsewhere.getBot({ id: foreign.id }), 403, 'Forbidden')
    // Its own bot through another workspace: not there.
    await expectApiError(elsewhere.getBot({ id: mine.id }), 404, 'ResourceNotFound')
  })

  test('a bot API key cannot act as a workspace member (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const key = expectValid('createBotApiKey', await api.createBotApiKey({ botId: bot.id, note: 'limited' }))
    const asBot = client({ token: key.value, workspaceId: ws.id })
    await expectApiError(asBot.listBots({}), 403, 'Forbidden')
    await expectApiError(asBot.deleteBot({ id: bot.id }), 403, 'Forbidden')
    await expectApiError(asBot.createBotApiKey({ botId: bot.id, note: 'more' }), 403, 'Forbidden')
    await expectApiError(asBot.listWorkspaceMembers({}), 403, 'Forbidden')
    expectValid('getBot', await api.getBot({ id: bot.id }))
  })

  test("another workspace's bot and keys are 404", async () => {
    const { api } = await newWorkspace()
    const { api: other } = await newWorkspace()
    const { bot: foreign } = expectValid('createBot', await other.createBot({}))
    const foreignKey = expectValid('createBotApiKey', await other.createBotApiKey({ botId: foreign.id, note: 'theirs' }))
    await expectApiError(api.listBotApiKeys({ botId: foreign.id }), 404, 'ResourceNotFound')
    await expectApiError(api.createBotApiKey({ botId: foreign.id, note: 'steal' }), 404, 'ResourceNotFound')
    await expectApiError(api.deleteBotApiKey({ id: foreignKey.id }), 404, 'ResourceNotFound')
    assert.equal(expectValid('listBotApiKeys', await other.listBotApiKeys({ botId: foreign.id })).baks.length, 1)
  })

  test('a viewer cannot list or create bot API keys (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const key = expectValid('createBotApiKey', await api.createBotApiKey({ botId: bot.id, note: 'k' }))
    const { token } = await newAccount(api, 'viewer')
    const viewer = client({ token, workspaceId: ws.id })
    await expectApiError(viewer.listBotApiKeys({ botId: bot.id }), 403, 'Forbidden')
    await expectApiError(viewer.createBotApiKey({ botId: bot.id, note: 'v' }), 403, 'Forbidden')
    await expectApiError(viewer.deleteBotApiKey({ id: key.id }), 403, 'Forbidden')
  })

  test('deleting a bot revokes its keys', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const key = expectValid('createBotApiKey', await api.createBotApiKey({ botId: bot.id, note: 'gone' }))
    const asBot = client({ token: key.value, workspaceId: ws.id })
    expectValid('getBot', await asBot.getBot({ id: bot.id }))
    expectValid('deleteBot', await api.deleteBot({ id: bot.id }))
    // The key no longer authenticates (401), or finds nothing (404).
    await assert.rejects(asBot.getBot({ id: bot.id }), (e) => {
      assert.ok(isApiError(e) && [401, 404].includes(e.code), `expected 401 or 404, got ${e.code} ${e.type}: ${e.message}`)
      return true
    })
  })
})
