// Plugins and the rest of a bot's admin operations, with the official
// client, every answer validated against the reference: createPlugin,
// getPlugin, getPluginByName, listPlugins, updatePlugin, deletePlugin,
// getDereferencedPlugin, getPluginCode; the hub's listPublicPlugins,
// getPublicPluginById, getDereferencedPublicPluginById, getPublicPlugin,
// getPublicPluginCode; bots' plugins; createBotVersion, listBotVersions,
// getBotVersion, deployBotVersion, getBotJson, publishFromBotJson (a round
// trip), transferBot, getBotAllowlist, updateBotAllowlist,
// create/get/deleteIntegrationShareableId, unlinkSandboxedConversations,
// listActionRuns.
import assert from 'node:assert/strict'
import http from 'node:http'
import { after, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, apiUrl, adminToken, client, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

const servers = []
after(() => servers.forEach((s) => s.close()))

/** integrationServer answers like an SDK integration: register, actions (echo). */
async function integrationServer() {
  const srv = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      const json = JSON.parse(body || '{}')
      res.setHeader('content-type', 'application/json')
      if (req.headers['x-bp-operation'] === 'action_triggered') {
        if (json.input?.refuse) {
          res.writeHead(400).end(JSON.stringify({ id: 'err_1', code: 400, type: 'InvalidPayload', message: 'refused' }))
          return
        }
        res.end(JSON.stringify({ output: { echo: json.input } }))
        return
      }
      res.end('{}')
    })
  })
  srv.keepAliveTimeout = 100
  await new Promise((ok) => srv.listen(0, '127.0.0.1', ok))
  servers.push(srv)
  return `http://127.0.0.1:${srv.address().port}`
}

function pluginDef(name, version, extra = {}) {
  return {
    name,
    version,
    title: `Title of ${name}`,
    description: 'Reminds',
    code: { node: `module.exports = '${name} ${version}'`, browser: 'export default {}' },
    configuration: { schema: { type: 'object', properties: { every: { type: 'string' } } } },
    states: { last: { type: 'bot', schema: {} } },
    events: { reminded: { schema: {} } },
    actions: { remind: { input: { schema: {} }, output: { schema: {} } } },
    user: { tags: {} },
    conversation: { tags: {} },
    ...extra,
  }
}

/** A workspace with an interface, an integration implementing it, and a plugin needing both. */
async function pluginWorld(opts = {}) {
  const { ws, api } = await newWorkspace()
  const ifaceName = unique('creatable')
  const iface = expectValid('createInterface', await api.createInterface({
    name: ifaceName, version: '1.0.0',
    // A shared plugin may depend only on public interfaces.
    public: (opts.pluginVisibility ?? 'private') !== 'private',
    entities: { item: { schema: { type: 'object', properties: { title: { type: 'string' } } } } },
    actions: {}, events: {}, channels: {},
  })).interface
  const intName = unique('impl')
  // (createIntegration answers the spec's signingSecret, beyond the reference.)
  const integration = (await api.createIntegration({
    name: intName, version: '1.0.0', url: opts.url, visibility: opts.visibility ?? 'private',
    entities: { ticket: { schema: { type: 'object', properties: { ticketNo: { type: 'number' } } } } },
    interfaces: { [ifaceName]: { id: iface.id, entities: { item: { name: 'ticket' } }, actions: {}, events: {}, channels: {} } },
    actions: { echo: { input: { schema: {} }, output: { schema: {} } } },
  })).integration
  const pluginName = unique('reminders')
  const plugin = expectValid('createPlugin', await api.createPlugin(pluginDef(pluginName, '1.0.0', {
    visibility: opts.pluginVisibility ?? 'private',
    actions: { remind: { input: { schema: { type: 'object', properties: { item: { $ref: `interface:creatable/entities/item` } } } }, output: { schema: {} } } },
    dependencies: {
      interfaces: { creatable: { id: iface.id } },
      integrations: { chat: { name: intName, version: 'latest' } },
    },
  }))).plugin
  return { ws, api, iface, integration, plugin, pluginName, intName }
}

describe('plugins', () => {
  test('create, read, code, dereference, update, list, delete', async () => {
    const { api, iface, integration, plugin, pluginName } = await pluginWorld()
    assert.equal(plugin.dependencies.interfaces.creatable.id, iface.id)
    assert.equal(plugin.dependencies.integrations.chat.id, integration.id)
    expectValid('getPlugin', await api.getPlugin({ id: plugin.id }))
    const byName = expectValid('getPluginByName', await api.getPluginByName({ name: pluginName, version: 'latest' }))
    assert.equal(byName.plugin.id, plugin.id)
    const code = expectValid('getPluginCode', await api.getPluginCode({ id: plugin.id, platform: 'node' }))
    assert.equal(code.code, `module.exports = '${pluginName} 1.0.0'`)
    const deref = expectValid('getDereferencedPlugin', await api.getDereferencedPlugin({ id: plugin.id, interfaces: { creatable: integration.id } }))
    const item = deref.plugin.actions.remind.input.schema.properties.item
    assert.equal(item.$ref, undefined)
    assert.ok(item.properties.ticketNo)
    await expectApiError(api.getDereferencedPlugin({ id: plugin.id, interfaces: {} }), 400, 'InvalidPayload')

    const updated = expectValid('updatePlugin', await api.updatePlugin({ id: plugin.id, title: 'Reminders', events: { reminded: null } }))
    assert.equal(updated.plugin.title, 'Reminders')
    assert.equal(updated.plugin.events.reminded, undefined)
    const v2 = expectValid('createPlugin', await api.createPlugin(pluginDef(pluginName, '1.1.0'))).plugin
    const listed = expectValid('listPlugins', await api.listPlugins({ name: pluginName }))
    assert.deepEqual(listed.plugins.map((p) => p.id), [plugin.id, v2.id])
    await expectApiError(api.createPlugin(pluginDef(pluginName, '1.1.0')), 409, 'AlreadyExists')
    await expectApiError(api.createPlugin(pluginDef('Bad Name', '1.0.0')), 400, 'InvalidPayload')
    await expectApiError(api.createPlugin(pluginDef(unique('deps'), '1.0.0', { dependencies: { interfaces: { x: { name: 'nope-nope', version: '1.0.0' } } } })), 400, 'ReferenceNotFound')

    expectValid('deletePlugin', await api.deletePlugin({ id: v2.id }))
    await expectApiError(api.getPlugin({ id: v2.id }), 404, 'ResourceNotFound')
  })

  test('a bot uses a plugin of the catalogue; a missing one is refused', async () => {
    const { api, integration, plugin, intName } = await pluginWorld()
    const { bot } = expectValid('createBot', await api.createBot({}))
    await api.updateBot({ id: bot.id, integrations: { [intName]: { integrationId: integration.id, enabled: false } } })
    const entry = {
      id: plugin.id,
      configuration: { every: 'day' },
      interfaces: { creatable: { integrationId: integration.id } },
      integrations: { chat: { integrationId: integration.id, integrationAlias: intName } },
    }
    expectValid('updateBot', await api.updateBot({ id: bot.id, plugins: { rem: entry } }))
    const got = expectValid('getBot', await api.getBot({ id: bot.id })).bot
    assert.equal(got.plugins.rem.name, plugin.name)
    assert.equal(got.plugins.rem.version, '1.0.0')
    assert.equal(got.plugins.rem.interfaces.creatable.integrationAlias, intName)
    await expectApiError(api.updateBot({ id: bot.id, plugins: { other: { id: 'intver_01JZZZZZZZZZZZZZZZZZZZZZZZ' } } }), 400, 'ReferenceNotFound')
    await expectApiError(api.updateBot({ id: bot.id, plugins: { rem: { ...entry, configuration: { every: 5 } } } }), 400, 'InvalidPayload')
    await expectApiError(api.deletePlugin({ id: plugin.id }), 409, 'ReferenceConstraint')
  })

  test('the hub: public plugins for everyone, private ones never', async () => {
    const { api, integration, plugin, pluginName } = await pluginWorld({ pluginVisibility: 'public', visibility: 'public' })
    const { token } = await newAccount(api, 'viewer')
    const outsider = client({ token })
    const listed = expectValid('listPublicPlugins', await outsider.listPublicPlugins({ name: pluginName }))
    assert.deepEqual(listed.plugins.map((p) => p.id), [plugin.id])
    expectValid('getPublicPluginById', await outsider.getPublicPluginById({ id: plugin.id }))
    expectValid('getPublicPlugin', await outsider.getPublicPlugin({ name: pluginName, version: '1.0.0' }))
    const code = expectValid('getPublicPluginCode', await outsider.getPublicPluginCode({ id: plugin.id, platform: 'browser' }))
    assert.equal(code.code, 'export default {}')
    const deref = expectValid('getDereferencedPublicPluginById', await outsider.getDereferencedPublicPluginById({ id: plugin.id, interfaces: { creatable: integration.id } }))
    assert.ok(deref.plugin.actions.remind.input.schema.properties.item.properties.ticketNo)
    const priv = expectValid('createPlugin', await api.createPlugin(pluginDef(unique('hidden'), '1.0.0'))).plugin
    await expectApiError(outsider.getPublicPluginById({ id: priv.id }), 404, 'ResourceNotFound')
    await expectApiError(outsider.getPublicPluginCode({ id: priv.id, platform: 'node' }), 404, 'ResourceNotFound')
  })
})

describe('bots: JSON, versions, transfer, allowlist, shareable ids, action runs', () => {
  test('a bot exported then re-imported is the same bot; versions deploy', async () => {
    const { api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({
      name: unique('exported'), tags: { team: 'a' }, code: 'exports.v = 1',
      states: { s: { type: 'conversation', schema: { type: 'object' } } },
      events: { e: { schema: {} } },
    }))
    const before = expectValid('getBot', await api.getBot({ id: bot.id })).bot
    const json = expectValid('getBotJson', await api.getBotJson({ id: bot.id }))
    assert.equal(json.code, 'exports.v = 1')
    const version = expectValid('createBotVersion', await api.createBotVersion({ id: bot.id, name: 'v1', description: 'first' })).version
    await api.updateBot({ id: bot.id, name: 'changed', tags: { team: '', x: 'y' }, states: { s: null }, code: 'exports.v = 2' })
    expectValid('publishFromBotJson', await api.publishFromBotJson({ id: bot.id, botJson: json }))
    const back = expectValid('getBot', await api.getBot({ id: bot.id })).bot
    const strip = ({ updatedAt, deployedAt, ...rest }) => rest
    assert.deepEqual(strip(back), strip(before))

    await api.updateBot({ id: bot.id, name: 'later' })
    const versions = expectValid('listBotVersions', await api.listBotVersions({ id: bot.id })).versions
    assert.deepEqual(versions.map((v) => v.id), [version.id])
    const { url } = expectValid('getBotVersion', await api.getBotVersion({ id: bot.id, versionId: version.id }))
    assert.match(url, /\/bot-json\?versionId=/)
    expectValid('deployBotVersion', await api.deployBotVersion({ id: bot.id, versionId: version.id }))
    assert.equal((await api.getBot({ id: bot.id })).bot.name, before.name)
    await expectApiError(api.deployBotVersion({ id: bot.id, versionId: 'botver_01JZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')
    await expectApiError(api.publishFromBotJson({ id: bot.id, botJson: { format: 'elsewhere/v1' } }), 400, 'InvalidPayload')
  })

  test('transferBot moves a bot to another workspace the caller administers', async () => {
    const { ws: from, api } = await newWorkspace()
    const { ws: to, api: target } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({ name: unique('mover') }))
    const { token: strangerToken } = await newAccount(target, 'owner', 'stranger')
    const { ws: theirs } = await newWorkspace(strangerToken)
    await expectApiError(api.transferBot({ id: bot.id, targetWorkspaceId: theirs.id }), 404, 'ResourceNotFound')
    expectValid('transferBot', await api.transferBot({ id: bot.id, targetWorkspaceId: to.id }))
    await expectApiError(api.getBot({ id: bot.id }), 404, 'ResourceNotFound')
    expectValid('getBot', await target.getBot({ id: bot.id }))
    assert.equal((await target.listBots({})).bots.length, 1)
    assert.equal((await api.listBots({})).bots.length, 0)
    assert.ok(from.id)
  })

  test('allowlist, shareable ids, sandbox, action runs', async () => {
    const url = await integrationServer()
    const { api, integration, intName } = await pluginWorld({ url })
    const { bot } = expectValid('createBot', await api.createBot({}))
    await api.updateBot({ id: bot.id, integrations: { main: { integrationId: integration.id, enabled: true } } })

    const none = expectValid('getBotAllowlist', await api.getBotAllowlist({ botId: bot.id }))
    assert.equal(none.setting, 'ALL_WORKSPACE_USERS')
    const me = (await api.getWorkspaceMember({})).userId
    expectValid('updateBotAllowlist', await api.updateBotAllowlist({ botId: bot.id, setting: 'SELECTED_USERS', users: { [me]: true } }))
    const list = expectValid('getBotAllowlist', await api.getBotAllowlist({ botId: bot.id }))
    assert.deepEqual(list.users, [{ id: me }])
    await expectApiError(api.updateBotAllowlist({ botId: bot.id, users: { 'not-a-member': true } }), 400, 'ReferenceNotFound')

    const created = expectValid('createIntegrationShareableId', await api.createIntegrationShareableId({ botId: bot.id, integrationId: integration.id }))
    const got = expectValid('getIntegrationShareableId', await api.getIntegrationShareableId({ botId: bot.id, integrationId: integration.id, integrationInstanceAlias: 'main' }))
    assert.equal(got.shareableId, created.shareableId)
    assert.equal(got.isExpired, false)
    expectValid('unlinkSandboxedConversations', await api.unlinkSandboxedConversations({ botId: bot.id, integrationId: integration.id }))
    expectValid('deleteIntegrationShareableId', await api.deleteIntegrationShareableId({ botId: bot.id, integrationId: integration.id }))
    await expectApiError(api.getIntegrationShareableId({ botId: bot.id, integrationId: integration.id }), 404, 'ResourceNotFound')
    await expectApiError(api.createIntegrationShareableId({ botId: bot.id, integrationId: 'intver_01JZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')

    const botApi = new Client({ apiUrl, token: adminToken(), botId: bot.id })
    await botApi.callAction({ type: 'main:echo', input: { n: 1 } })
    await expectApiError(botApi.callAction({ type: 'main:echo', input: { refuse: true } }), 400)
    const runs = expectValid('listActionRuns', await api.listActionRuns({ id: bot.id, integrationName: 'main' }))
    assert.equal(runs.data.length, 2)
    assert.equal(runs.data[0].status, 'FAILURE')
    assert.equal(runs.data[1].status, 'SUCCESS')
    assert.deepEqual(runs.data[1].output, { echo: { n: 1 } })
    const page = expectValid('listActionRuns', await api.listActionRuns({ id: bot.id, integrationName: 'main', pageSize: 1 }))
    assert.equal(page.data.length, 1)
    assert.ok(page.meta.nextToken)
    await expectApiError(api.listActionRuns({ id: bot.id, integrationName: 'main', timestampFrom: 'yesterday' }), 400, 'InvalidPayload')
    assert.ok(intName)
  })
})
