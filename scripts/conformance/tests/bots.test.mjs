// Bots: createBot, getBot, listBots, deleteBot; foreign bots, roles,
// pagination (pageSize, nextToken, the client's list.bots collection).
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

function fiveBots(res) {
  expectValid('listBots', res)
  assert.equal(res.bots.length, 5)
  return res.bots
}

describe('bots', () => {
  test('create, get, list, delete', async () => {
    const { ws, api } = await newWorkspace()
    const name = unique('bot')
    const { bot } = expectValid('createBot', await api.createBot({ name, tags: { team: 'qa' } }))
    assert.equal(bot.name, name)
    assert.deepEqual(bot.tags, { team: 'qa' })

    const got = expectValid('getBot', await api.getBot({ id: bot.id }))
    assert.deepEqual(got.bot, bot)

    const list = expectValid('listBots', await api.listBots({}))
    assert.deepEqual(
      list.bots.map((b) => b.id),
      [bot.id],
    )
    assert.equal(list.bots[0].name, name)
    assert.equal(list.bots[0].createdAt, bot.createdAt)

    assert.equal(expectValid('getWorkspace', await client().getWorkspace({ id: ws.id })).botCount, 1)

    expectValid('deleteBot', await api.deleteBot({ id: bot.id }))
    await expectApiError(api.getBot({ id: bot.id }), 404, 'ResourceNotFound')
    await expectApiError(api.deleteBot({ id: bot.id }), 404, 'ResourceNotFound')
    assert.deepEqual(expectValid('listBots', await api.listBots({})).bots, [])
    assert.equal(expectValid('getWorkspace', await client().getWorkspace({ id: ws.id })).botCount, 0)
  })

  test('createBot with a full definition answers a valid Bot, and getBot the same', async () => {
    const { api } = await newWorkspace()
    const definition = {
      name: unique('full'),
      description: 'a bot with every definition field',
      tags: { team: 'qa', tier: 'gold' },
      user: { tags: { email: { title: 'Email' } } },
      conversation: { tags: { channel: { title: 'Channel' } } },
      message: { tags: { source: {} } },
      states: {
        counter: { type: 'conversation', schema: { type: 'object', properties: { n: { type: 'number' } } } },
        profile: { type: 'user', schema: { type: 'object' }, expiry: 3600 },
      },
      events: { ping: { title: 'Ping', schema: { type: 'object' } } },
      recurringEvents: { tick: { type: 'ping', payload: { from: 'cron' }, schedule: { cron: '*/5 * * * *' } } },
      subscriptions: { events: { ping: {} } },
      actions: {
        greet: {
          title: 'Greet',
          input: { schema: { type: 'object', properties: { who: { type: 'string' } } } },
          output: { schema: { type: 'object' } },
        },
      },
      configuration: { data: { greeting: 'hi' }, schema: { type: 'object' } },
      medias: [{ url: 'https://example.com/icon.png', name: 'icon' }],
      url: 'https://bot.example.com/hook',
      code: 'export default {}',
      dev: false,
    }
    const { bot } = expectValid('createBot', await api.createBot(definition))
    assert.equal(bot.name, definition.name)
    assert.equal(bot.description, definition.description)
    assert.deepEqual(bot.tags, definition.tags)
    assert.deepEqual(bot.user, definition.user)
    assert.deepEqual(bot.states, definition.states)
    assert.deepEqual(bot.events, definition.events)
    assert.deepEqual(bot.actions, definition.actions)
    assert.deepEqual(bot.configuration, definition.configuration)
    assert.deepEqual(bot.medias, definition.medias)
    assert.deepEqual(bot.recurringEvents.tick.schedule, definition.recurringEvents.tick.schedule)
    const got = expectValid('getBot', await api.getBot({ id: bot.id }))
    assert.deepEqual(got.bot, bot)
  })

  test('createBot with no body gets the defaults', async () => {
    const { api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    assert.ok(bot.name, 'a default name')
    assert.deepEqual(bot.tags, {})
    expectValid('getBot', await api.getBot({ id: bot.id }))
  })

  test('a foreign bot is 404 (getBot, deleteBot)', async () => {
    const { api: mine } = await newWorkspace()
    const { ws: otherWs, api: other } = await newWorkspace()
    const { bot } = expectValid('createBot', await other.createBot({}))
    // Another workspace of the same account: the bot is not there.
    await expectApiError(mine.getBot({ id: bot.id }), 404, 'ResourceNotFound')
    await expectApiError(mine.deleteBot({ id: bot.id }), 404, 'ResourceNotFound')
    assert.ok(!expectValid('listBots', await mine.listBots({})).bots.some((b) => b.id === bot.id))

    // Another account that is not a member of the bot's workspace.
    const { token } = await newAccount(mine, 'owner')
    const stranger = client({ token, workspaceId: otherWs.id })
    await expectApiError(stranger.getBot({ id: bot.id }), 404, 'ResourceNotFound')
    await expectApiError(stranger.listBots({}), 404, 'ResourceNotFound')
    await expectApiError(stranger.createBot({}), 404, 'ResourceNotFound')
    await expectApiError(stranger.deleteBot({ id: bot.id }), 404, 'ResourceNotFound')

    expectValid('getBot', await other.getBot({ id: bot.id }))
  })

  test('an unknown bot is 404', async () => {
    const { api } = await newWorkspace()
    await expectApiError(api.getBot({ id: 'bot_01ZZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')
  })

  test('a viewer lists and reads bots but cannot create or delete them (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const { token } = await newAccount(api, 'viewer')
    const viewer = client({ token, workspaceId: ws.id })
    expectValid('listBots', await viewer.listBots({}))
    expectValid('getBot', await viewer.getBot({ id: bot.id }))
    await expectApiError(viewer.createBot({}), 403, 'Forbidden')
    await expectApiError(viewer.deleteBot({ id: bot.id }), 403, 'Forbidden')
    expectValid('getBot', await api.getBot({ id: bot.id }))
    assert.equal(expectValid('listBots', await api.listBots({})).bots.length, 1)
  })

  test('a developer creates and deletes bots', async () => {
    const { ws, api } = await newWorkspace()
    const { token } = await newAccount(api, 'developer')
    const dev = client({ token, workspaceId: ws.id })
    const { bot } = expectValid('createBot', await dev.createBot({}))
    expectValid('deleteBot', await dev.deleteBot({ id: bot.id }))
  })

  test('listBots pages with pageSize and nextToken', async () => {
    const { api } = await newWorkspace()
    const ids = []
    for (let i = 0; i < 5; i++) ids.push(expectValid('createBot', await api.createBot({ name: `page-${i}` })).bot.id)

    const seen = []
    let nextToken
    let pages = 0
    do {
      const page = expectValid('listBots', await api.listBots({ pageSize: 2, nextToken }))
      assert.ok(page.bots.length <= 2, `a page holds at most pageSize bots, got ${page.bots.length}`)
      seen.push(...page.bots.map((b) => b.id))
      nextToken = page.meta.nextToken
      assert.ok(++pages <= 10, 'pagination terminates')
    } while (nextToken)
    assert.ok(pages >= 3, `5 bots at 2 per page take at least 3 pages, took ${pages}`)
    assert.equal(seen.length, ids.length, 'no bot is listed twice')
    assert.deepEqual(new Set(seen), new Set(ids))
    // Default order: createdAt, newest first (bots of one millisecond may tie).
    const byId = new Map(fiveBots(await api.listBots({ pageSize: 100 })).map((b) => [b.id, b]))
    const created = seen.map((id) => byId.get(id).createdAt)
    assert.deepEqual(created, [...created].sort().reverse(), 'pages come newest first')

    const asc = expectValid('listBots', await api.listBots({ sortField: 'createdAt', sortDirection: 'asc', pageSize: 100 }))
    const ascCreated = asc.bots.map((b) => b.createdAt)
    assert.deepEqual(ascCreated, [...ascCreated].sort(), 'sortDirection asc is oldest first')
    assert.deepEqual(new Set(asc.bots.map((b) => b.id)), new Set(ids))

    const one = expectValid('listBots', await api.listBots({ pageSize: 1 }))
    assert.equal(one.bots.length, 1)
    assert.ok(one.meta.nextToken)
    const all = expectValid('listBots', await api.listBots({ pageSize: 100 }))
    assert.equal(all.bots.length, 5)
    assert.equal(all.meta.nextToken, undefined)
  })

  test("the client's list.bots collection walks every page", async () => {
    const { api } = await newWorkspace()
    const ids = []
    for (let i = 0; i < 5; i++) ids.push(expectValid('createBot', await api.createBot({})).bot.id)
    const collected = await api.list.bots({ pageSize: 2 }).collect()
    for (const b of collected) expectValid('listBots', { bots: [b], meta: {} })
    assert.deepEqual(new Set(collected.map((b) => b.id)), new Set(ids))
    assert.equal(collected.length, ids.length)
    const limited = await api.list.bots({ pageSize: 2 }).collect({ limit: 3 })
    assert.equal(limited.length, 3)
  })

  test('listBots filters by tags', async () => {
    const { api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({ tags: { env: 'prod' } }))
    expectValid('createBot', await api.createBot({ tags: { env: 'dev' } }))
    const res = expectValid('listBots', await api.listBots({ tags: { env: 'prod' } }))
    assert.deepEqual(
      res.bots.map((b) => b.id),
      [bot.id],
    )
  })

  test('listBots rejects pageSize 0 and 101 (400)', async () => {
    const { api } = await newWorkspace()
    await expectApiError(api.listBots({ pageSize: 0 }), 400)
    await expectApiError(api.listBots({ pageSize: 101 }), 400)
    expectValid('listBots', await api.listBots({ pageSize: 1 }))
    expectValid('listBots', await api.listBots({ pageSize: 100 }))
  })

  test('listBots rejects a forged or foreign nextToken (400)', async () => {
    const { api } = await newWorkspace()
    const { api: other } = await newWorkspace()
    for (let i = 0; i < 2; i++) {
      expectValid('createBot', await api.createBot({}))
      expectValid('createBot', await other.createBot({}))
    }
    const page = expectValid('listBots', await api.listBots({ pageSize: 1 }))
    const token = page.meta.nextToken
    assert.ok(token)
    await expectApiError(api.listBots({ pageSize: 1, nextToken: 'forged' }), 400)
    await expectApiError(api.listBots({ pageSize: 1, nextToken: token.slice(0, -2) + (token.endsWith('AA') ? 'BB' : 'AA') }), 400)
    // Valid for its own list only: not another workspace's, nor other filters.
    await expectApiError(other.listBots({ pageSize: 1, nextToken: token }), 400)
    await expectApiError(api.listBots({ pageSize: 1, nextToken: token, sortDirection: 'asc' }), 400)
    expectValid('listBots', await api.listBots({ pageSize: 1, nextToken: token }))
  })
})
