// The rest of the reference (issue 15): introspect, runVrl, billing.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace } from '../lib/env.mjs'

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

  test('runVrl is refused in the error shape', async () => {
    await expectApiError(client().runVrl({ data: { a: 1 }, script: '.b = .a' }), 403, 'Forbidden')
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
