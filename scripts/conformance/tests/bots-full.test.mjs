// The full bot definition: updateBot (every field, entries patched one by
// one), integrations installed by alias or id (x-multiple-integrations),
// their registration against a local integration server (signed, with its
// outcome and the operations ledger), recurring events delivered to a
// local bot server (signed, failures counted, stopped by removal and by
// deleteBot).
//
// Signatures: X-BP-Signature: <ms>,<base64url HMAC-SHA256 of "<ms>.<body>">
// keyed with the signing secret decoded as base64url (docs/bots.md).
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import http from 'node:http'
import { after, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, client, expectApiError, newAccount, newWorkspace, subMinuteSchedules, unique } from '../lib/env.mjs'

/** definition is a small integration: a channel requiring a tag, a configuration schema. */
function definition(name, version, extra = {}) {
  return {
    name,
    version,
    configuration: { schema: { type: 'object', properties: { token: { type: 'string' } } } },
    channels: {
      dm: {
        messages: { text: { schema: { type: 'object' } } },
        conversation: { creation: { enabled: true, requiredTags: ['userId'] }, tags: { userId: {} } },
      },
    },
    ...extra,
  }
}

/** valid validates a bot response against the reference, less the spec's Bot.secrets. */
function valid(op, res) {
  const copy = structuredClone(res)
  if (copy.bot) delete copy.bot.secrets
  expectValid(op, copy)
  return res
}

function verify(secret, body, header) {
  if (!header) return false
  const [ts, sig] = header.split(',')
  const mac = crypto.createHmac('sha256', Buffer.from(secret, 'base64url')).update(`${ts}.${body}`).digest('base64url')
  return mac === sig && Math.abs(Date.now() - Number(ts)) < 5 * 60 * 1000
}

const servers = []
after(() => servers.forEach((s) => s.close()))

/** receiver starts an HTTP server recording each request; answer decides the reply. */
async function receiver(answer = () => [200, '{}']) {
  const r = { calls: [], secret: '', answer }
  const srv = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', async () => {
      r.calls.push({ headers: req.headers, body, json: JSON.parse(body || '{}'), signed: verify(r.secret, body, req.headers['x-bp-signature']), at: Date.now() })
      const [status, text] = await r.answer(req)
      if (status === 0) return // hang: never answer
      res.writeHead(status, { 'content-type': 'application/json' }).end(text)
    })
  })
  srv.keepAliveTimeout = 100
  await new Promise((ok) => srv.listen(0, '127.0.0.1', ok))
  servers.push(srv)
  r.url = `http://127.0.0.1:${srv.address().port}`
  return r
}

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms))

async function until(what, check, ms = 8000) {
  const end = Date.now() + ms
  let lastErr // a check that throws is retried: only the time up fails
  for (;;) {
    try {
      const v = await check()
      if (v) return v
    } catch (err) {
      lastErr = err
    }
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}${lastErr ? `; last error: ${lastErr.stack ?? lastErr}` : ''}`)
    await sleep(100)
  }
}

/** admin calls an operation of ours that the client does not know. */
async function admin(method, path, workspaceId, body, token = adminToken()) {
  const res = await fetch(apiUrl + path, {
    method,
    headers: { authorization: `Bearer ${token}`, 'x-workspace-id': workspaceId, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  })
  return { status: res.status, body: await res.json() }
}

describe('bots: the full definition', () => {
  test('updateBot takes every field; getBot answers it; entries patch one by one', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = valid('createBot', await api.createBot({ name: unique('b'), tags: { keep: '1', drop: '2' } }))
    const def = {
      id: bot.id,
      name: unique('concierge'),
      description: 'answers the door',
      url: 'https://bot.example.com/hook',
      code: 'export default {}',
      alwaysAlive: true,
      maxExecutionTime: 30,
      tags: { team: 'qa', drop: '' },
      user: { tags: { email: { title: 'Email' } } },
      conversation: { tags: { topic: { title: 'Topic' } } },
      message: { tags: { source: {} } },
      states: { counter: { type: 'conversation', schema: { type: 'object' }, expiry: 60000 } },
      events: { doorbell: { title: 'Doorbell', schema: { type: 'object' } } },
      actions: { open: { title: 'Open', input: { schema: {} }, output: { schema: {} } } },
      configuration: { data: { floor: 3 }, schema: { type: 'object' } },
      subscriptions: { events: { doorbell: {} } },
      recurringEvents: { nightly: { schedule: { cron: '0 3 * * *' }, type: 'doorbell', payload: { who: 'cron' } } },
      medias: [{ url: 'https://example.com/a.png', name: 'avatar' }],
      secrets: { API_TOKEN: 't0k3n' },
    }
    const updated = valid('updateBot', await api.updateBot(def)).bot
    const got = valid('getBot', await api.getBot({ id: bot.id })).bot
    assert.deepEqual(got, updated)
    for (const k of ['name', 'description', 'alwaysAlive', 'maxExecutionTime', 'user', 'conversation', 'message', 'states', 'events', 'actions', 'configuration', 'subscriptions', 'medias']) {
      assert.deepEqual(got[k], def[k], k)
    }
    assert.deepEqual(got.tags, { keep: '1', team: 'qa' })
    assert.deepEqual(got.recurringEvents.nightly, { ...def.recurringEvents.nightly, failedAttempts: 0, lastFailureReason: null })
    assert.deepEqual(got.secrets, ['API_TOKEN'])
    assert.ok(!JSON.stringify(got).includes('t0k3n'))
    assert.equal(got.status, 'active')
    assert.ok(got.deployedAt)

    const patched = valid('updateBot', await api.updateBot({ id: bot.id, states: { counter: null, profile: { type: 'user', schema: {} } }, user: { tags: { email: null } }, secrets: { API_TOKEN: null } })).bot
    assert.deepEqual(Object.keys(patched.states), ['profile'])
    assert.deepEqual(patched.user, { tags: {} })
    assert.equal(patched.secrets, undefined)
    assert.deepEqual(patched.events, def.events)

    // Viewers read it without the signing secret, and cannot change it.
    const { token } = await newAccount(api, 'viewer')
    const viewer = client({ token, workspaceId: ws.id })
    assert.equal(valid('getBot', await viewer.getBot({ id: bot.id })).bot.signingSecret, '')
    await expectApiError(viewer.updateBot({ id: bot.id, name: 'x' }), 403, 'Forbidden')
    // Other workspaces do not see it.
    const { api: other } = await newWorkspace()
    await expectApiError(other.updateBot({ id: bot.id, name: 'x' }), 404, 'ResourceNotFound')
    // Bad input is a 400 and changes nothing.
    for (const body of [
      { recurringEvents: { r: { schedule: { cron: 'often' }, type: 't', payload: {} } } },
      { url: 'not a url' },
      { integrations: { nothing: { enabled: true } } },
      { integrations: { x: { integrationId: 'intver_01JZZZZZZZZZZZZZZZZZZZZZZZ' } } },
      { plugins: { p: { id: 'short' } } },
      { maxExecutionTime: 0 },
    ]) {
      await expectApiError(api.updateBot({ id: bot.id, ...body }), 400)
    }
    assert.deepEqual(valid('getBot', await api.getBot({ id: bot.id })).bot, patched)
  })

  test('installing an integration registers it at its url, signed; failures and unknown outcomes are kept', async () => {
    const { ws, api } = await newWorkspace()
    const integ = await receiver()
    const created = (await api.createIntegration(definition(unique('chatty'), '1.0.0', { url: integ.url }))).integration
    integ.secret = created.signingSecret
    // One second to answer (the client sends maxExecutionTime on update only).
    await api.updateIntegration({ id: created.id, maxExecutionTime: 1 })
    const { bot } = valid('createBot', await api.createBot({}))

    const u = valid('updateBot', await api.updateBot({ id: bot.id, integrations: { main: { integrationId: created.id, enabled: true, configuration: { token: 'abc' } } } })).bot
    assert.equal(integ.calls.length, 1)
    const call = integ.calls[0]
    assert.equal(call.headers['x-bp-operation'], 'register')
    assert.equal(call.headers['x-bot-id'], bot.id)
    assert.equal(call.headers['x-integration-id'], created.id)
    assert.equal(call.headers['x-integration-alias'], 'main')
    assert.deepEqual(JSON.parse(Buffer.from(call.headers['x-bp-configuration'], 'base64').toString()), { token: 'abc' })
    assert.ok(call.signed, 'the registration is signed with the integration signing secret')
    const inst = u.integrations[created.id]
    assert.equal(inst.status, 'registered')
    assert.equal(inst.webhookId, call.headers['x-webhook-id'])
    assert.ok(call.json.webhookUrl.endsWith(inst.webhookId))
    assert.equal(inst.webhookUrl, call.json.webhookUrl)

    // Keyed by alias with x-multiple-integrations.
    const byAlias = new Client({ apiUrl, token: adminToken(), workspaceId: ws.id, headers: { 'x-multiple-integrations': 'true' } })
    assert.deepEqual(Object.keys(valid('getBot', await byAlias.getBot({ id: bot.id })).bot.integrations), ['main'])

    // Failing: registration_failed with the reason.
    integ.answer = () => [500, '{"message":"nope"}']
    const failed = valid('updateBot', await api.updateBot({ id: bot.id, integrations: { main: { configuration: { token: 'x' } } } })).bot
    assert.equal(failed.integrations[created.id].status, 'registration_failed')
    assert.match(failed.integrations[created.id].statusReason, /answered 500/)

    // Hanging: outcome_unknown, the instance stays pending, no retry.
    integ.answer = () => [0, '']
    const hung = valid('updateBot', await api.updateBot({ id: bot.id, integrations: { main: { configuration: { token: 'y' } } } })).bot
    const reason = hung.integrations[created.id].statusReason
    assert.equal(hung.integrations[created.id].status, 'registration_pending')
    const opId = reason.match(/intop_[0-9A-Z]{26}/)[0]
    const op = await admin('GET', `/v1/admin/integration-operations/${opId}`, ws.id)
    assert.equal(op.status, 200)
    assert.equal(op.body.operation.status, 'outcome_unknown')
    assert.equal(op.body.operation.type, 'register')
    const calls = integ.calls.length
    await sleep(1500)
    assert.equal(integ.calls.length, calls, 'an operation of unknown outcome is never retried')
    const ops = await admin('GET', `/v1/admin/bots/${bot.id}/integration-operations`, ws.id)
    assert.deepEqual(ops.body.operations.map((o) => o.status), ['outcome_unknown', 'failed', 'succeeded'])

    // An administrator reconciles it.
    const { token: devToken } = await newAccount(api, 'developer')
    assert.equal((await admin('POST', `/v1/admin/integration-operations/${opId}/reconcile`, ws.id, { status: 'succeeded' }, devToken)).status, 403)
    const rec = await admin('POST', `/v1/admin/integration-operations/${opId}/reconcile`, ws.id, { status: 'succeeded', note: 'checked' })
    assert.equal(rec.status, 200)
    assert.equal(rec.body.operation.reconciliation.note, 'checked')
    assert.equal((await admin('POST', `/v1/admin/integration-operations/${opId}/reconcile`, ws.id, { status: 'failed' })).status, 409)
    assert.equal(valid('getBot', await api.getBot({ id: bot.id })).bot.integrations[created.id].status, 'registered')

    // Installed, it cannot be deleted; removed, it is unregistered.
    await expectApiError(api.deleteIntegration({ id: created.id }), 409)
    integ.answer = () => [200, '{}']
    const removed = valid('updateBot', await api.updateBot({ id: bot.id, integrations: { main: null } })).bot
    assert.deepEqual(removed.integrations, {})
    assert.equal(integ.calls.at(-1).headers['x-bp-operation'], 'unregister')
    assert.ok(integ.calls.at(-1).signed)
    expectValid('deleteIntegration', await api.deleteIntegration({ id: created.id }))
  })

  test('recurring events reach the bot, signed; failures count; removal and deleteBot stop them', { skip: subMinuteSchedules }, async () => {
    const { api } = await newWorkspace()
    const botSrv = await receiver()
    const every = (type) => ({ schedule: { cron: '* * * * * *' }, type, payload: { n: 1 } })
    const { bot } = valid('createBot', await api.createBot({ url: botSrv.url, recurringEvents: { beat: every('heartbeat') } }))
    botSrv.secret = bot.signingSecret

    await until('two deliveries', () => botSrv.calls.length >= 2)
    const d = botSrv.calls[0]
    assert.equal(d.headers['x-bp-operation'], 'event_received')
    assert.equal(d.headers['x-bp-type'], 'heartbeat')
    assert.equal(d.headers['x-bot-id'], bot.id)
    assert.ok(d.signed, 'the delivery is signed with the bot signing secret')
    assert.equal(d.json.event.type, 'heartbeat')
    assert.deepEqual(d.json.event.payload, { n: 1 })
    assert.equal(d.json.event.status, 'pending')

    botSrv.answer = () => [503, 'maintenance']
    const failing = await until('failed attempts', async () => {
      const re = valid('getBot', await api.getBot({ id: bot.id })).bot.recurringEvents.beat
      return re.failedAttempts >= 2 && re
    })
    assert.match(failing.lastFailureReason, /503/)
    botSrv.answer = () => [200, '{}']
    await until('recovery', async () => valid('getBot', await api.getBot({ id: bot.id })).bot.recurringEvents.beat.failedAttempts === 0)

    valid('updateBot', await api.updateBot({ id: bot.id, recurringEvents: { beat: null, tock: every('tock') } }))
    await sleep(1200)
    let since = Date.now()
    await sleep(2500)
    const later = botSrv.calls.filter((c) => c.at > since)
    assert.ok(later.length >= 1, 'the remaining recurring event keeps firing')
    assert.ok(later.every((c) => c.headers['x-bp-type'] === 'tock'), 'a removed recurring event stops')

    expectValid('deleteBot', await api.deleteBot({ id: bot.id }))
    await sleep(1200)
    since = Date.now()
    await sleep(2000)
    assert.equal(botSrv.calls.filter((c) => c.at > since).length, 0, 'deleting the bot stops its recurring events')
  })
})
