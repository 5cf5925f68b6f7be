// The runtime with the REAL official SDK (@botpress/sdk 7.2.4): a plain-JS
// bot and integration (fixtures/) run as processes on loopback, registered
// through createIntegration({dev, url}) and createBot({dev, url}) +
// updateBot({integrations}), their callbacks authenticated with the admin's
// personal access token as under `bp dev`.
//
// Registration, webhook ingress relayed both ways, configureIntegration and
// initializeIncomingMessage from the integration's handlers, the message
// round trip (webhook -> integration -> bot -> reply -> integration's
// channel -> ack), callAction to the integration and to the bot, bad input.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, expectApiError, newWorkspace } from '../lib/env.mjs'
import { setupRuntime } from '../lib/runtime.mjs'

describe('runtime with @botpress/sdk 7.2.4', () => {
  let rt, api, botApi

  before(async () => {
    ;({ api } = await newWorkspace())
    rt = await setupRuntime(api)
    botApi = new Client({ apiUrl, token: adminToken(), botId: rt.bot.id })
  })
  after(async () => {
    await rt?.stop()
  })

  test('the install reaches the integration\'s register handler and ends registered', async () => {
    assert.equal(rt.install.status, 'registered', JSON.stringify(rt.install))
    const reg = await rt.integrationFixture.waitFor((c) => c.op === 'register')
    assert.equal(reg.webhookUrl, rt.install.webhookUrl)
    assert.equal(reg.webhookId, rt.install.webhookId)
    assert.equal(reg.alias, rt.alias)
    assert.equal(reg.botId, rt.bot.id)
    assert.match(rt.install.webhookUrl, /\/webhooks\/whk_[0-9A-Za-z]+$/)
    const { bot } = await api.getBot({ id: rt.bot.id })
    assert.equal(bot.integrations[rt.integration.id].status, 'registered')
  })

  test('a POST to the webhook url reaches the integration\'s handler; its answer is relayed verbatim', async () => {
    const res = await fetch(`${rt.install.webhookUrl}/updates/new?x=1&y=two`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-provider-signature': 'abc' },
      body: '{"update_id":42}',
    })
    assert.equal(res.status, 202)
    assert.equal(res.headers.get('x-fixture'), 'integration')
    const answer = await res.json()
    assert.equal(answer.alias, rt.alias)
    assert.equal(answer.botId, rt.bot.id)
    assert.equal(answer.got.method, 'POST')
    assert.equal(answer.got.path, '/updates/new')
    assert.equal(answer.got.query, 'x=1&y=two')
    assert.equal(answer.got.body, '{"update_id":42}')
    assert.equal(answer.got.headers['x-provider-signature'], 'abc')
    const seen = await rt.integrationFixture.waitFor((c) => c.op === 'webhook_received' && c.req.path === '/updates/new')
    assert.equal(seen.webhookId, rt.install.webhookId)
  })

  test('a provider verification challenge (GET, text answer) comes back as the integration wrote it', async () => {
    const res = await fetch(`${rt.install.webhookUrl}/challenge?hub.mode=subscribe&hub.challenge=c-123`)
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'text/plain')
    assert.equal(await res.text(), 'c-123')
  })

  test('the OAuth redirect form reaches the installation named by state', async () => {
    const res = await fetch(`${apiUrl}/webhooks/oauth/callback?code=xyz&state=${rt.install.webhookId}`)
    assert.equal(res.status, 202)
    const answer = await res.json()
    assert.equal(answer.got.path, '/oauth/callback')
    assert.equal(answer.got.method, 'GET')
  })

  test('an integration handler that throws: its error answer is relayed', async () => {
    const res = await fetch(`${rt.install.webhookUrl}/refuse`, { method: 'POST', body: '{}' })
    assert.equal(res.status, 400)
    const err = await res.json()
    assert.equal(err.type, 'Runtime')
    assert.match(err.message, /this webhook refuses/)
  })

  test('an unknown webhook id answers 404 in the error shape', async () => {
    const res = await fetch(`${apiUrl}/webhooks/whk_01JZZZZZZZZZZZZZZZZZZZZZZZ`, { method: 'POST', body: '{}' })
    assert.equal(res.status, 404)
    const err = await res.json()
    assert.equal(err.code, 404)
    assert.equal(err.type, 'ResourceNotFound')
    assert.match(err.id, /^err_/)
  })

  test('the integration\'s register handler records its identifier (configureIntegration)', async () => {
    const { bot } = await api.getBot({ id: rt.bot.id })
    assert.equal(bot.integrations[rt.integration.id].identifier, 'fixture-' + rt.install.webhookId.slice(-6))
  })

  test('a webhook handler gets or creates user, conversation and message in one callback (initializeIncomingMessage)', async () => {
    const update = { from: 'u-1', chat: 'c-1', id: 'm-1', name: 'Ann', text: 'hello' }
    const post = () => fetch(`${rt.install.webhookUrl}/incoming`, { method: 'POST', body: JSON.stringify(update) })
    const res = await post()
    assert.equal(res.status, 200)
    const first = expectValid('initializeIncomingMessage', await res.json())
    assert.equal(first.user.tags[`${rt.alias}:id`] ?? first.user.tags.id, 'u-1')
    assert.equal(first.user.name, 'Ann')
    assert.equal(first.conversation.channel, 'channel')
    assert.equal(first.conversation.integration, rt.alias)
    assert.equal(first.message.direction, 'incoming')
    assert.equal(first.message.userId, first.user.id)
    assert.equal(first.message.conversationId, first.conversation.id)
    assert.deepEqual(first.message.payload, { text: 'hello' })
    // The same update again finds the same records.
    const again = await (await post()).json()
    assert.deepEqual([again.user.id, again.conversation.id, again.message.id], [first.user.id, first.conversation.id, first.message.id])
    const { message } = await botApi.getMessage({ id: first.message.id })
    assert.equal(message.id, first.message.id)
  })

  test('that message reaches the bot, whose reply reaches the integration\'s channel (and is acknowledged)', async () => {
    const got = await rt.botFixture.waitFor((c) => c.op === 'message_created' && c.message.payload.text === 'hello')
    assert.equal(got.message.direction, 'incoming')
    const sent = await rt.integrationFixture.waitFor((c) => c.op === 'message_created' && c.payload.text === 'echo: hello')
    assert.equal(sent.conversation.id, got.message.conversationId)
    assert.equal(sent.message.direction, 'outgoing')
    // The integration's ack (updateMessage with the provider's id) is stored.
    for (let i = 0; ; i++) {
      const { message } = await botApi.getMessage({ id: sent.message.id })
      if (message.tags.id === 'ext-' + sent.message.id || message.tags[`${rt.alias}:id`] === 'ext-' + sent.message.id) break
      if (i > 100) assert.fail(`no ack on ${JSON.stringify(message)}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  })

  test('callAction to the integration returns its output', async () => {
    const out = expectValid('callAction', await botApi.callAction({ type: `${rt.alias}:echo`, input: { n: 7, s: 'hi' } }))
    assert.deepEqual(out, { output: { echoed: { n: 7, s: 'hi' }, alias: rt.alias }, meta: { cached: false } })
    await rt.integrationFixture.waitFor((c) => c.op === 'action_triggered' && c.input.n === 7)
  })

  test('callAction to the bot\'s own action returns its output', async () => {
    const out = expectValid('callAction', await botApi.callAction({ type: 'ping', input: { x: 'hello' } }))
    assert.deepEqual(out, { output: { pong: 'hello' }, meta: { cached: false } })
    await rt.botFixture.waitFor((c) => c.op === 'action_triggered' && c.input.x === 'hello')
  })

  test('callAction with bad input answers 4xx with the reason', async () => {
    let e = await expectApiError(botApi.callAction({ type: `${rt.alias}:echo`, input: { n: 'seven' } }), 400, 'InvalidPayload')
    assert.match(e.message, /input/)
    e = await expectApiError(botApi.callAction({ type: 'nope:echo', input: {} }), 404, 'ResourceNotFound')
    assert.match(e.message, /alias "nope"/)
    e = await expectApiError(botApi.callAction({ type: `${rt.alias}:missing`, input: {} }), 400, 'InvalidPayload')
    assert.match(e.message, /no action "missing"/)
    // The integration's own refusal (a RuntimeError thrown by the action).
    e = await expectApiError(botApi.callAction({ type: `${rt.alias}:echo`, input: { refuse: 'because' } }), 400, 'Runtime')
    assert.match(e.message, /echo refuses: because/)
    // The bot's SDK refuses an action it does not have.
    e = await expectApiError(botApi.callAction({ type: 'unknownAction', input: {} }), 400, 'Runtime')
    assert.match(e.message, /unknownAction not found/)
  })
})
