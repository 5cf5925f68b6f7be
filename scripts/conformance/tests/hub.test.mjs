// The hub and the operations the CLI calls around deploys:
// listPublicIntegrations, getPublicIntegrationById, getPublicIntegration,
// checkHandleAvailability, validateIntegrationCreation/Update (--dryRun),
// interfaces (create, get, get by name, list, update, delete) and the hub's
// public interfaces; an unknown route. Other test files publish to the hub
// at the same time: assertions look at this file's unique names only.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { adminToken, apiUrl, client, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

function integration(name, version, extra = {}) {
  return {
    name,
    version,
    title: `Title of ${name}`,
    description: `Does ${name} things`,
    channels: { dm: { messages: { text: { schema: { type: 'object' } } } } },
    actions: { ping: { title: 'Ping', input: { schema: {} }, output: { schema: {} } } },
    ...extra,
  }
}

function iface(name, version, extra = {}) {
  return {
    name,
    version,
    entities: { item: { title: 'Item', schema: { type: 'object' } } },
    actions: { create: { input: { schema: {} }, output: { schema: {} } } },
    events: { created: { schema: {} } },
    channels: { main: { messages: { text: { schema: {} } } } },
    nameTemplate: { script: '{{item}}', language: 'handlebars' },
    ...extra,
  }
}

describe('hub: public integrations', () => {
  test('listed to every workspace; private never; by id and by name', async () => {
    const { ws, api } = await newWorkspace()
    const name = unique('hubint')
    const v1 = (await api.createIntegration(integration(name, '1.0.0', { visibility: 'public' }))).integration
    const v2 = (await api.createIntegration(integration(name, '1.1.0', { visibility: 'public' }))).integration
    const secret = unique('hubpriv')
    const priv = (await api.createIntegration(integration(secret, '1.0.0'))).integration

    // Another account, no workspace header.
    const { token } = await newAccount(api, 'viewer')
    const outsider = client({ token })
    const all = expectValid('listPublicIntegrations', await outsider.listPublicIntegrations({ name }))
    assert.deepEqual(all.integrations.map((i) => i.id), [v2.id, v1.id])
    assert.equal(all.integrations[0].ownerWorkspace.id, ws.id)
    assert.equal(all.integrations[0].meta.installs, 0)
    const latest = expectValid('listPublicIntegrations', await outsider.listPublicIntegrations({ name, version: 'latest' }))
    assert.deepEqual(latest.integrations.map((i) => i.id), [v2.id])
    assert.equal((await outsider.listPublicIntegrations({ name: secret })).integrations.length, 0)
    const searched = expectValid('listPublicIntegrations', await outsider.listPublicIntegrations({ search: name }))
    assert.ok(searched.integrations.every((i) => i.matchedOn))
    assert.ok(searched.integrations.some((i) => i.id === v1.id))

    // Pages of the whole hub: ours appear once each.
    const seen = []
    let nextToken
    for (let i = 0; i < 100; i++) {
      const page = expectValid('listPublicIntegrations', await outsider.listPublicIntegrations({ limit: 5, nextToken }))
      seen.push(...page.integrations.map((i) => i.id))
      nextToken = page.meta.nextToken
      if (!nextToken) break
    }
    assert.equal(seen.filter((id) => id === v1.id || id === v2.id).length, 2)
    assert.ok(!seen.includes(priv.id))

    const byId = expectValid('getPublicIntegrationById', await outsider.getPublicIntegrationById({ id: v1.id }))
    assert.equal(byId.integration.name, name)
    assert.equal(byId.integration.signingSecret, undefined)
    const byName = expectValid('getPublicIntegration', await outsider.getPublicIntegration({ name, version: 'latest' }))
    assert.equal(byName.integration.id, v2.id)
    await expectApiError(outsider.getPublicIntegrationById({ id: priv.id }), 404, 'ResourceNotFound')
    await expectApiError(outsider.getPublicIntegration({ name: secret, version: '1.0.0' }), 404, 'ResourceNotFound')
    // Not even its own workspace reads a private version through the hub.
    await expectApiError(api.getPublicIntegrationById({ id: priv.id }), 404, 'ResourceNotFound')
    await expectApiError(outsider.listPublicIntegrations({ sortBy: 'size' }), 400)
  })
})

describe('workspace handles', () => {
  test('checkHandleAvailability before and after a workspace takes the handle', async () => {
    const { ws, api } = await newWorkspace()
    const handle = unique('handle')
    const free = expectValid('checkHandleAvailability', await api.checkHandleAvailability({ handle }))
    assert.equal(free.available, true)
    expectValid('updateWorkspace', await api.updateWorkspace({ id: ws.id, handle }))
    const taken = expectValid('checkHandleAvailability', await api.checkHandleAvailability({ handle }))
    assert.equal(taken.available, false)
    assert.ok(taken.suggestions.length > 0 && !taken.suggestions.includes(handle))
    assert.equal((await api.getWorkspace({ id: ws.id })).name, ws.name)
    const { api: other, ws: otherWs } = await newWorkspace()
    await expectApiError(other.updateWorkspace({ id: otherWs.id, handle }), 409, 'AlreadyExists')
    expectValid('updateWorkspace', await other.updateWorkspace({ id: otherWs.id, handle: taken.suggestions[0] }))
    await expectApiError(api.checkHandleAvailability({ handle: 'Not Valid' }), 400, 'InvalidPayload')
  })
})

describe('integration dry runs', () => {
  test('validateIntegrationCreation and validateIntegrationUpdate check and write nothing', async () => {
    const { api } = await newWorkspace()
    const name = unique('dry')
    expectValid('validateIntegrationCreation', await api.validateIntegrationCreation(integration(name, '1.0.0')))
    await expectApiError(api.getIntegrationByName({ name, version: '1.0.0' }), 404, 'ResourceNotFound')
    const created = (await api.createIntegration(integration(name, '1.0.0'))).integration
    await expectApiError(api.validateIntegrationCreation(integration(name, '1.0.0')), 409, 'AlreadyExists')
    await expectApiError(api.validateIntegrationCreation(integration('Bad Name', '1.0.0')), 400, 'InvalidPayload')
    expectValid('validateIntegrationUpdate', await api.validateIntegrationUpdate({ id: created.id, title: 'Renamed' }))
    assert.equal((await api.getIntegration({ id: created.id })).integration.title, `Title of ${name}`)
    await expectApiError(api.validateIntegrationUpdate({ id: created.id, maxExecutionTime: 0 }), 400, 'InvalidPayload')
  })
})

describe('interfaces', () => {
  test('create, get, get by name, list, update, delete; tenancy; the hub', async () => {
    const { api } = await newWorkspace()
    const name = unique('iface')
    const v1 = expectValid('createInterface', await api.createInterface(iface(name, '1.0.0'))).interface
    const v2 = expectValid('createInterface', await api.createInterface(iface(name, '1.1.0', { public: true }))).interface
    await expectApiError(api.createInterface(iface(name, '1.0.0')), 409, 'AlreadyExists')
    expectValid('getInterface', await api.getInterface({ id: v1.id }))
    assert.equal(expectValid('getInterfaceByName', await api.getInterfaceByName({ name, version: 'latest' })).interface.id, v2.id)
    const listed = expectValid('listInterfaces', await api.listInterfaces({ name }))
    assert.deepEqual(listed.interfaces.map((i) => i.id), [v1.id, v2.id])
    const updated = expectValid('updateInterface', await api.updateInterface({ id: v1.id, title: 'Creatable', actions: { create: null } }))
    assert.equal(updated.interface.title, 'Creatable')
    assert.deepEqual(updated.interface.actions, {})

    const { api: other } = await newWorkspace()
    await expectApiError(other.getInterface({ id: v1.id }), 404, 'ResourceNotFound')
    await expectApiError(other.updateInterface({ id: v1.id, title: 'x' }), 404, 'ResourceNotFound')
    await expectApiError(other.deleteInterface({ id: v1.id }), 404, 'ResourceNotFound')
    expectValid('getInterface', await other.getInterface({ id: v2.id }))
    await expectApiError(other.updateInterface({ id: v2.id, title: 'x' }), 403, 'Forbidden')
    assert.equal((await other.listInterfaces({})).interfaces.length, 0)

    const hub = expectValid('listPublicInterfaces', await other.listPublicInterfaces({ name }))
    assert.deepEqual(hub.interfaces.map((i) => i.id), [v2.id])
    expectValid('getPublicInterfaceById', await other.getPublicInterfaceById({ id: v2.id }))
    expectValid('getPublicInterface', await other.getPublicInterface({ name, version: '1.1.0' }))
    await expectApiError(other.getPublicInterfaceById({ id: v1.id }), 404, 'ResourceNotFound')

    // An integration implementing it by id (as bp deploy sends it) carries its name and version.
    const impl = await api.createIntegration(integration(unique('impl'), '1.0.0', { interfaces: { [`${name}<item>`]: { id: v2.id, entities: {}, actions: {}, events: {} } } }))
    const entry = impl.integration.interfaces[`${name}<item>`]
    assert.equal(entry.name, name)
    assert.equal(entry.version, '1.1.0')
    const found = expectValid('listIntegrations', await api.listIntegrations({ interfaceName: name }))
    assert.deepEqual(found.integrations.map((i) => i.id), [impl.integration.id])

    expectValid('deleteInterface', await api.deleteInterface({ id: v1.id }))
    await expectApiError(api.getInterface({ id: v1.id }), 404, 'ResourceNotFound')
    await expectApiError(api.createInterface(iface('Bad Name', '1.0.0')), 400, 'InvalidPayload')
  })
})

describe('unknown routes', () => {
  test('answer MethodNotFound (the operation does not exist), not ResourceNotFound', async () => {
    for (const [method, path] of [['GET', '/v1/admin/nope'], ['POST', '/v1/chat/nope/x'], ['PATCH', '/v1/admin/bots']]) {
      const res = await fetch(apiUrl + path, { method, headers: { Authorization: `Bearer ${adminToken()}` } })
      const body = await res.json()
      assert.equal(res.status, 405, `${method} ${path}`)
      assert.equal(body.type, 'MethodNotFound')
      assert.equal(body.code, 405)
      assert.match(body.message, /does not exist/)
      assert.match(body.id, /^err_/)
    }
  })
})
