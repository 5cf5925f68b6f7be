// The rest of the reference (issue 15): introspect, runVrl, billing, account and workspace settings, usage and quotas, bot analytics and webchat.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, client, expectApiError, newAccount, newWorkspace } from '../lib/env.mjs'

describe('helpers', () => {
  test('introspect names the bot, its workspace and the caller', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const me = expectValid('getAccount', await client().getAccount())
    const res = expectValid('introspect', await client().introspect({ botId: bot.id }))
    assert.deepEqual(res, { workspaceId: ws.id, botId: bot.id, userId: me.account.id })
    const other = await newWorkspace()
    const { token } = await newAccount(other.api, 'owner')
    await expectApiError(client({ token }).introspect({ botId: bot.id }), 404, 'ResourceNotFound')
  })

  test('runVrl runs a script on data', async () => {
    const res = expectValid('runVrl', await client().runVrl({ data: { body: '{"installation":{"id":42}}' }, script: 'to_string!(parse_json!(.body).installation.id)' }))
    assert.deepEqual(res, { data: { body: '{"installation":{"id":42}}' }, result: '42' })
    await expectApiError(client().runVrl({ data: { a: 1 }, script: '.b = = .a' }), 400, 'InvalidPayload')
  })
})

describe('billing', () => {
  test('nothing is billed: no invoices, a zero upcoming invoice, nothing to charge', async () => {
    const { ws } = await newWorkspace()
    const admin = client()
    assert.deepEqual(expectValid('listWorkspaceInvoices', await admin.listWorkspaceInvoices({ id: ws.id })), { invoices: [] })
    const up = expectValid('getUpcomingInvoice', await admin.getUpcomingInvoice({ id: ws.id }))
    assert.equal(up.total, 0)
    const charged = expectValid('chargeWorkspaceUnpaidInvoices', await admin.chargeWorkspaceUnpaidInvoices({ id: ws.id }))
    assert.deepEqual(charged, { chargedInvoices: [], failedInvoices: [] })
    await expectApiError(admin.chargeWorkspaceUnpaidInvoices({ id: ws.id, invoiceIds: ['in_1'] }), 404, 'ResourceNotFound')
  })

  test('changeAISpendQuota sets the workspace spending limit', async () => {
    const { ws, api } = await newWorkspace()
    expectValid('changeAISpendQuota', await api.changeAISpendQuota({ monthlySpendingLimit: 42 }))
    const got = expectValid('getWorkspace', await client().getWorkspace({ id: ws.id }))
    assert.equal(got.spendingLimit, 42)
    const { token } = await newAccount(api, 'viewer')
    await expectApiError(client({ token, workspaceId: ws.id }).changeAISpendQuota({ monthlySpendingLimit: 1 }), 403, 'Forbidden')
  })
})

describe('account and workspace settings', () => {
  test('updateAccount, preferences, deleteAccount', async () => {
    const { api } = await newWorkspace()
    const { token } = await newAccount(api, 'developer')
    const me = client({ token })
    const up = expectValid('updateAccount', await me.updateAccount({ displayName: 'Conformance' }))
    assert.equal(up.account.displayName, 'Conformance')
    expectValid('setAccountPreference', await me.setAccountPreference({ key: 'theme', value: { dark: true } }))
    assert.deepEqual(expectValid('getAccountPreference', await me.getAccountPreference({ key: 'theme' })).value, { dark: true })
    await expectApiError(me.getAccountPreference({ key: 'unset' }), 404, 'ResourceNotFound')
    expectValid('deleteAccount', await me.deleteAccount({}))
    await expectApiError(me.getAccount(), 401, 'Unauthorized')
  })

  test('deleteAccount of a last owner is refused', async () => {
    const { api } = await newWorkspace()
    const { token } = await newAccount(api, 'viewer')
    await newWorkspace(token)
    await expectApiError(client({ token }).deleteAccount({}), 403, 'Forbidden')
    expectValid('getAccount', await client({ token }).getAccount())
  })

  test('workspace preferences', async () => {
    const { api } = await newWorkspace()
    expectValid('setWorkspacePreference', await api.setWorkspacePreference({ key: 'layout', value: 'grid' }))
    assert.equal(expectValid('getWorkspacePreference', await api.getWorkspacePreference({ key: 'layout' })).value, 'grid')
  })

  test('public workspaces', async () => {
    const { ws } = await newWorkspace()
    await expectApiError(client().getPublicWorkspace({ id: ws.id }), 404, 'ResourceNotFound')
    expectValid('updateWorkspace', await client().updateWorkspace({ id: ws.id, isPublic: true }))
    const pub = expectValid('getPublicWorkspace', await client().getPublicWorkspace({ id: ws.id }))
    assert.equal(pub.id, ws.id)
    const listed = expectValid('listPublicWorkspaces', await client().listPublicWorkspaces({ workspaceIds: [ws.id] }))
    assert.deepEqual(listed.workspaces.map((w) => w.id), [ws.id])
    expectValid('listPublicWorkspaces', await client().listPublicWorkspaces({}))
  })
})

describe('usage and quotas', () => {
  test('usages from the platform counters, quotas, history', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const u = expectValid('getUsage', await api.getUsage({ id: ws.id, type: 'bot_count' }))
    assert.equal(u.usage.value, 1)
    const m = expectValid('getMultipleUsages', await api.getMultipleUsages({ ids: [ws.id], types: ['bot_count', 'workspace_member_count'] }))
    assert.equal(m.usages.length, 2)
    expectValid('listUsageHistory', await api.listUsageHistory({ id: ws.id, type: 'bot_count' }))
    expectValid('listUsageActivity', await api.listUsageActivity({ id: bot.id, type: 'invocation_calls' }))
    expectValid('listUsageActivityDaily', await api.listUsageActivityDaily({ id: bot.id, type: 'invocation_calls' }))
    expectValid('getWorkspaceQuota', await api.getWorkspaceQuota({ id: ws.id, type: 'bot_count' }))
    expectValid('listWorkspaceQuotas', await api.listWorkspaceQuotas({ id: ws.id }))
    const per = expectValid('listWorkspaceUsages', await api.listWorkspaceUsages({ id: ws.id, type: 'table_row_count' }))
    assert.deepEqual(per.usages.map((x) => x.id), [bot.id])
    const by = expectValid('breakDownWorkspaceUsageByBot', await api.breakDownWorkspaceUsageByBot({ id: ws.id, type: 'table_row_count' }))
    assert.deepEqual(by.data, [{ botId: bot.id, value: 0 }])
    const c = expectValid('getAllWorkspaceQuotaCompletion', await client().getAllWorkspaceQuotaCompletion({}))
    assert.ok(c[ws.id])
    const other = await newWorkspace()
    const { token } = await newAccount(other.api, 'owner')
    await expectApiError(client({ token }).getUsage({ id: ws.id, type: 'bot_count' }), 404, 'ResourceNotFound')
  })
})

describe('bot analytics and webchat', () => {
  test('trackAnalytics counts, getBotAnalytics answers them per day', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const asBot = new Client({ apiUrl, token: adminToken(), botId: bot.id })
    expectValid('trackAnalytics', await asBot.trackAnalytics({ name: 'signup', count: 2 }))
    expectValid('trackAnalytics', await asBot.trackAnalytics({ name: 'signup', count: 3 }))
    const now = new Date()
    const day = (d) => d.toISOString().slice(0, 10)
    const res = expectValid('getBotAnalytics', await api.getBotAnalytics({ id: bot.id, startDate: day(new Date(now.getTime() - 86400000)), endDate: day(new Date(now.getTime() + 86400000)) }))
    const total = res.records.reduce((n, r) => n + (r.customEvents.signup || 0), 0)
    assert.equal(total, 5)
    // Without the built-in webchat integration installed there is no page
    // (scripts/webchat/e2e.mjs installs it and opens the page).
    await expectApiError(api.getBotWebchat({ id: bot.id, type: 'preconfigured' }), 404, 'ResourceNotFound')
    assert.ok(ws.id)
  })
})
