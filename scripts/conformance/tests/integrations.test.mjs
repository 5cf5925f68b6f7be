// Integrations: createIntegration, getIntegration, getIntegrationByName,
// listIntegrations (every filter), updateIntegration, deleteIntegration,
// requestIntegrationVerification, integration API keys; visibility across
// workspaces, roles, bad input.
//
// The specification adds fields the reference (1.70.2) lacks: an
// integration's signingSecret (to its developers) and maxConcurrency. They
// are checked here, and left out of the reference validation.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

const SPEC_ONLY = ['signingSecret', 'maxConcurrency']

/** valid validates an integration response against the reference, less the spec's additions. */
function valid(op, res) {
  const copy = structuredClone(res)
  if (copy.integration) for (const k of SPEC_ONLY) delete copy.integration[k]
  expectValid(op, copy)
  return res
}

function definition(name, version, extra = {}) {
  return {
    name,
    version,
    title: `Title of ${name}`,
    description: `Sends reminders through ${name}`,
    configuration: { schema: { type: 'object', properties: { token: { type: 'string' } } } },
    configurations: { oauth: { title: 'OAuth', schema: { type: 'object', required: ['clientId'] } } },
    channels: {
      dm: {
        messages: { text: { schema: { type: 'object' } } },
        conversation: { creation: { enabled: true, requiredTags: ['userId'] }, tags: { userId: { title: 'User' } } },
      },
    },
    actions: { sendReminder: { title: 'Send a reminder', input: { schema: {} }, output: { schema: {} } } },
    events: { reacted: { schema: {} } },
    states: { creds: { type: 'integration', schema: {} } },
    entities: { ticket: { schema: {} } },
    user: { tags: { id: {} } },
    interfaces: { creatable: { id: 'intver_01JAAAAAAAAAAAAAAAAAAAAAAA', actions: { create: { name: 'sendReminder' } } } },
    attributes: { category: 'chat' },
    secrets: { API_KEY: 's3cret' },
    ...extra,
  }
}

describe('integrations', () => {
  test('create, get, get by name, update, delete', async () => {
    const { api } = await newWorkspace()
    const name = unique('acme')
    const created = valid('createIntegration', await api.createIntegration(definition(name, '1.0.0', { url: 'https://acme.example.com' })))
    const it = created.integration
    assert.equal(it.name, name)
    assert.equal(it.visibility, 'private')
    assert.equal(it.verificationStatus, 'unapproved')
    assert.equal(it.lifecycleStatus, 'published')
    // maxConcurrency is the spec's; this client version does not send it.
    assert.ok(it.signingSecret, 'the developer sees the signing secret')
    assert.deepEqual(it.secrets, ['API_KEY'])
    assert.ok(!JSON.stringify(it).includes('s3cret'), 'secret values are never answered')
    assert.deepEqual(it.channels.dm.conversation.creation.requiredTags, ['userId'])

    const got = valid('getIntegration', await api.getIntegration({ id: it.id }))
    assert.deepEqual(got.integration, it)
    valid('createIntegration', await api.createIntegration(definition(name, '1.1.0')))
    assert.equal(valid('getIntegrationByName', await api.getIntegrationByName({ name, version: '1.0.0' })).integration.id, it.id)
    assert.equal(valid('getIntegrationByName', await api.getIntegrationByName({ name, version: 'latest' })).integration.version, '1.1.0')
    await expectApiError(api.getIntegrationByName({ name, version: '3.0.0' }), 404, 'ResourceNotFound')

    // Versions are immutable once published, except through updateIntegration.
    await expectApiError(api.createIntegration(definition(name, '1.0.0')), 409, 'AlreadyExists')
    const upd = valid(
      'updateIntegration',
      await api.updateIntegration({ id: it.id, title: 'Acme!', actions: { sendReminder: null }, attributes: { category: null, tier: 'gold' }, url: null }),
    )
    assert.equal(upd.integration.title, 'Acme!')
    assert.deepEqual(upd.integration.actions, {})
    assert.deepEqual(upd.integration.attributes, { tier: 'gold' })
    assert.equal(upd.integration.url, '')

    valid('deleteIntegration', await api.deleteIntegration({ id: it.id }))
    await expectApiError(api.getIntegration({ id: it.id }), 404, 'ResourceNotFound')
    await expectApiError(api.deleteIntegration({ id: it.id }), 404, 'ResourceNotFound')
  })

  test('public integrations are listed to other workspaces, private ones never', async () => {
    const { ws, api } = await newWorkspace()
    const pub = unique('pub')
    const priv = unique('priv')
    const shared = valid('createIntegration', await api.createIntegration(definition(pub, '1.0.0', { visibility: 'public' }))).integration
    const hidden = valid('createIntegration', await api.createIntegration(definition(priv, '1.0.0'))).integration

    const { api: other } = await newWorkspace()
    const list = valid('listIntegrations', await other.listIntegrations({ name: pub }))
    assert.deepEqual(list.integrations.map((i) => i.id), [shared.id])
    assert.equal(list.integrations[0].ownerWorkspace.id, ws.id)
    assert.deepEqual(valid('listIntegrations', await other.listIntegrations({ name: priv })).integrations, [])

    const seen = valid('getIntegration', await other.getIntegration({ id: shared.id })).integration
    assert.equal(seen.signingSecret, undefined, 'another workspace never sees the signing secret')
    valid('getIntegrationByName', await other.getIntegrationByName({ name: pub, version: 'latest' }))
    await expectApiError(other.getIntegration({ id: hidden.id }), 404, 'ResourceNotFound')
    await expectApiError(other.getIntegrationByName({ name: priv, version: '1.0.0' }), 404, 'ResourceNotFound')
    await expectApiError(other.updateIntegration({ id: hidden.id, title: 'x' }), 404, 'ResourceNotFound')
    await expectApiError(other.deleteIntegration({ id: hidden.id }), 404, 'ResourceNotFound')
    await expectApiError(other.updateIntegration({ id: shared.id, title: 'x' }), 403, 'Forbidden')
    await expectApiError(other.listIntegrationApiKeys({ integrationId: hidden.id }), 404, 'ResourceNotFound')
    // The public name belongs to its publisher.
    await expectApiError(other.createIntegration(definition(pub, '2.0.0', { visibility: 'public' })), 409, 'AlreadyExists')
  })

  test('listIntegrations filters, searches, sorts and pages', async () => {
    const { ws, api } = await newWorkspace()
    // Other tests' public integrations are listed too: names carry a tag
    // of this test, and catalogue-wide filters look at this workspace's.
    const tag = unique('t')
    const a = `${tag}-alpha`
    const b = `${tag}-beta`
    const a1 = valid('createIntegration', await api.createIntegration(definition(a, '1.0.0'))).integration
    const a2 = valid('createIntegration', await api.createIntegration(definition(a, '2.0.0'))).integration
    const b1 = valid(
      'createIntegration',
      await api.createIntegration(definition(b, '0.1.0', { actions: {}, interfaces: {}, description: 'nothing here' })),
    ).integration
    const dev = valid('createIntegration', await api.createIntegration(definition(`${tag}-dev`, '0.0.1', { dev: true }))).integration

    const ids = async (q) =>
      valid('listIntegrations', await api.listIntegrations(q))
        .integrations.filter((i) => i.ownerWorkspace.id === ws.id)
        .map((i) => i.id)
    assert.deepEqual((await ids({ name: a })).sort(), [a1.id, a2.id].sort())
    assert.deepEqual(await ids({ name: a, version: 'latest' }), [a2.id])
    assert.deepEqual(await ids({ name: a, version: '1.0.0' }), [a1.id])
    assert.deepEqual(await ids({ dev: true }), [dev.id])
    assert.deepEqual((await ids({ interfaceName: 'creatable' })).sort(), [a1.id, a2.id].sort())
    assert.deepEqual((await ids({ interfaceId: 'intver_01JAAAAAAAAAAAAAAAAAAAAAAA' })).sort(), [a1.id, a2.id].sort())
    assert.deepEqual(await ids({ visibility: 'public' }), [])
    assert.deepEqual(await ids({ verificationStatus: 'approved' }), [])
    assert.deepEqual(await ids({ search: tag, sortBy: 'createdAt', direction: 'asc' }), [a1.id, a2.id, b1.id])
    assert.deepEqual(await ids({ search: tag, sortBy: 'name', direction: 'desc' }), [b1.id, a2.id, a1.id])

    const found = valid('listIntegrations', await api.listIntegrations({ search: 'REMINDER' }))
    const mine = found.integrations.filter((i) => i.ownerWorkspace.id === ws.id)
    assert.deepEqual(mine.map((i) => i.id).sort(), [a1.id, a2.id].sort())
    for (const i of mine) {
      assert.deepEqual(i.matchedOn.actions, ['sendReminder'])
      assert.equal(i.matchedOn.description, true)
      assert.equal(i.matchedOn.name, false)
    }
    assert.equal(valid('listIntegrations', await api.listIntegrations({})).integrations[0].matchedOn, undefined)

    const { bot } = expectValid('createBot', await api.createBot({}))
    expectValid('updateBot', await api.updateBot({ id: bot.id, integrations: { b: { integrationId: b1.id, enabled: false } } }))
    assert.deepEqual(await ids({ installedByBotId: bot.id }), [b1.id])
    assert.equal((await ids({ search: tag, sortBy: 'installCount' }))[0], b1.id)
    assert.equal((await ids({ search: tag, sortBy: 'popularity' }))[0], b1.id)

    // Pages of limit, in order, with a token bound to its list.
    const q = { search: tag, limit: 2, sortBy: 'createdAt', direction: 'asc' }
    const first = valid('listIntegrations', await api.listIntegrations(q))
    assert.deepEqual(first.integrations.map((i) => i.id), [a1.id, a2.id])
    assert.ok(first.meta.nextToken)
    const second = valid('listIntegrations', await api.listIntegrations({ ...q, nextToken: first.meta.nextToken }))
    assert.deepEqual(second.integrations.map((i) => i.id), [b1.id])
    assert.equal(second.meta.nextToken, undefined)
    await expectApiError(api.listIntegrations({ ...q, sortBy: 'name', nextToken: first.meta.nextToken }), 400, 'InvalidPayload')
    await expectApiError(api.listIntegrations({ limit: 0 }), 400, 'InvalidPayload')
    await expectApiError(api.listIntegrations({ sortBy: 'stars' }), 400, 'InvalidPayload')
  })

  test('integration API keys act as their integration only', async () => {
    const { ws, api } = await newWorkspace()
    const it = valid('createIntegration', await api.createIntegration(definition(unique('keyed'), '1.0.0'))).integration
    assert.deepEqual(expectValid('listIntegrationApiKeys', await api.listIntegrationApiKeys({ integrationId: it.id })).iaks, [])
    const key = expectValid('createIntegrationApiKey', await api.createIntegrationApiKey({ integrationId: it.id, note: 'ci' }))
    assert.match(key.value, /^bp_iak_/)
    const list = expectValid('listIntegrationApiKeys', await api.listIntegrationApiKeys({ integrationId: it.id }))
    assert.deepEqual(list.iaks.map((k) => k.id), [key.id])
    assert.equal(list.iaks[0].value, undefined)

    const asIntegration = client({ token: key.value, workspaceId: ws.id })
    valid('getIntegration', await asIntegration.getIntegration({ id: it.id }))
    valid('updateIntegration', await asIntegration.updateIntegration({ id: it.id, title: 'by key' }))
    await expectApiError(asIntegration.listBots({}), 403, 'Forbidden')
    await expectApiError(asIntegration.deleteIntegration({ id: it.id }), 403, 'Forbidden')

    expectValid('deleteIntegrationApiKey', await api.deleteIntegrationApiKey({ id: key.id }))
    await expectApiError(asIntegration.getIntegration({ id: it.id }), 401, 'Unauthorized')
    await expectApiError(api.deleteIntegrationApiKey({ id: key.id }), 404, 'ResourceNotFound')
  })

  test('verification is requested for public versions', async () => {
    const { api } = await newWorkspace()
    const pub = valid('createIntegration', await api.createIntegration(definition(unique('v'), '1.0.0', { visibility: 'public' }))).integration
    expectValid('requestIntegrationVerification', await api.requestIntegrationVerification({ integrationId: pub.id }))
    assert.equal(valid('getIntegration', await api.getIntegration({ id: pub.id })).integration.verificationStatus, 'pending')
    const priv = valid('createIntegration', await api.createIntegration(definition(unique('p'), '1.0.0'))).integration
    await expectApiError(api.requestIntegrationVerification({ integrationId: priv.id }), 400, 'InvalidPayload')
  })

  test('viewers read without the signing secret; they write nothing', async () => {
    const { ws, api } = await newWorkspace()
    const it = valid('createIntegration', await api.createIntegration(definition(unique('r'), '1.0.0'))).integration
    const { token } = await newAccount(api, 'viewer')
    const v = client({ token, workspaceId: ws.id })
    const got = valid('getIntegration', await v.getIntegration({ id: it.id })).integration
    assert.equal(got.signingSecret, undefined)
    valid('listIntegrations', await v.listIntegrations({}))
    await expectApiError(v.createIntegration(definition(unique('x'), '1.0.0')), 403, 'Forbidden')
    await expectApiError(v.updateIntegration({ id: it.id, title: 'x' }), 403, 'Forbidden')
    await expectApiError(v.deleteIntegration({ id: it.id }), 403, 'Forbidden')
    await expectApiError(v.createIntegrationApiKey({ integrationId: it.id }), 403, 'Forbidden')
  })

  test('bad input is a 400 naming the field', async () => {
    const { api } = await newWorkspace()
    for (const [body, field] of [
      [{ name: 'Bad Name', version: '1.0.0' }, 'name'],
      [{ name: unique('ok'), version: '1.0' }, 'version'],
      [{ name: unique('ok'), version: '1.0.0', url: 'ftp://x' }, 'url'],
      [{ name: unique('ok'), version: '1.0.0', dev: true, visibility: 'public' }, 'visibility'],
      [{ name: unique('ok'), version: '1.0.0', secrets: { lower: 'x' } }, 'secrets.lower'],
      [{ name: unique('ok'), version: '1.0.0', channels: { c: {} } }, 'messages'],
    ]) {
      const err = await expectApiError(api.createIntegration(body), 400, 'InvalidPayload')
      assert.match(err.message, new RegExp(field.replace('.', '\\.')))
    }
  })
})
