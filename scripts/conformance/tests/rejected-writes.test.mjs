// A write the API rejects (409, 403) must leave no trace: every later read
// still answers, with the same data as before.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace } from '../lib/env.mjs'

// snapshot reads the workspace every way the tests use; reads of other
// partitions (the account's tokens and workspaces) must answer too.
async function snapshot(ws, api) {
  expectValid('listPersonalAccessTokens', await client().listPersonalAccessTokens({}))
  expectValid('listWorkspaces', await client().listWorkspaces({}))
  return {
    workspace: expectValid('getWorkspace', await client().getWorkspace({ id: ws.id })),
    members: expectValid('listWorkspaceMembers', await api.listWorkspaceMembers({ pageSize: 100 })).members,
    bots: expectValid('listBots', await api.listBots({ pageSize: 100 })).bots,
  }
}

describe('rejected writes', () => {
  test('a rejected invitation (409) in a workspace with a bot leaves later reads working', async () => {
    const { ws, api } = await newWorkspace()
    expectValid('createBot', await api.createBot({}))
    const { email } = await newAccount(api, 'viewer')
    const before = await snapshot(ws, api)
    await expectApiError(api.createWorkspaceMember({ email, role: 'developer' }), 409)
    assert.deepEqual(await snapshot(ws, api), before)
  })

  test('a rejected workspace deletion (409, bots left) leaves later reads working', async () => {
    const { ws, api } = await newWorkspace()
    expectValid('createBot', await api.createBot({ tags: {} }))
    const before = await snapshot(ws, api)
    await expectApiError(client().deleteWorkspace({ id: ws.id }), 409)
    assert.deepEqual(await snapshot(ws, api), before)
  })

  test('a rejected demotion of the last owner (403) leaves later reads working', async () => {
    const { ws, api } = await newWorkspace()
    expectValid('createBot', await api.createBot({}))
    const owner = expectValid('getWorkspaceMember', await api.getWorkspaceMember())
    const before = await snapshot(ws, api)
    await expectApiError(api.updateWorkspaceMember({ id: owner.id, role: 'viewer' }), 403, 'Forbidden')
    assert.deepEqual(await snapshot(ws, api), before)
  })
})
