// Account and personal access tokens: getAccount, listPersonalAccessTokens,
// createPersonalAccessToken, deletePersonalAccessToken; authentication errors.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { anonymousClient, client, expectApiError, isApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

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

describe('account', () => {
  test('getAccount returns the calling account', async () => {
    const res = expectValid('getAccount', await client().getAccount())
    assert.equal(res.account.email, 'admin@localhost')
    assert.equal(typeof res.account.id, 'string')
  })

  test('getAccount without a token is 401 UnauthorizedError', async () => {
    await expectApiError(anonymousClient().getAccount(), 401, 'Unauthorized')
  })

  test('getAccount with an unknown token is 401 UnauthorizedError', async () => {
    await expectApiError(client({ token: 'bp_pat_' + 'x'.repeat(32) }).getAccount(), 401, 'Unauthorized')
    await expectApiError(client({ token: 'not-a-token' }).getAccount(), 401, 'Unauthorized')
  })

  test('workspace-scoped operations without a token are 401 too', async () => {
    const { ws } = await newWorkspace()
    await expectApiError(anonymousClient(ws.id).listBots({}), 401, 'Unauthorized')
    await expectApiError(anonymousClient(ws.id).createBot({}), 401, 'Unauthorized')
    await expectApiError(anonymousClient().getWorkspace({ id: ws.id }), 401, 'Unauthorized')
  })

  test('an invited account sees its own account', async () => {
    const { api } = await newWorkspace()
    const { token, email } = await newAccount(api, 'viewer')
    const res = expectValid('getAccount', await client({ token }).getAccount())
    assert.equal(res.account.email, email)
  })
})

describe('personal access tokens', () => {
  test('list, create, use, delete; a deleted token stops working', async () => {
    const admin = client()
    const before = expectValid('listPersonalAccessTokens', await admin.listPersonalAccessTokens({}))
    assert.ok(before.pats.length >= 1, 'the admin token itself is listed')
    for (const p of before.pats) assert.equal(p.value, undefined, 'a listed token carries no value')

    const note = unique('note')
    const created = expectValid('createPersonalAccessToken', await admin.createPersonalAccessToken({ note }))
    assert.equal(created.pat.note, note)
    assert.equal(typeof created.pat.value, 'string')
    assert.ok(created.pat.value.length > 0)

    const listed = expectValid('listPersonalAccessTokens', await admin.listPersonalAccessTokens({}))
    const found = listed.pats.find((p) => p.id === created.pat.id)
    assert.ok(found, 'the new token is listed')
    assert.equal(found.note, note)
    assert.equal(found.createdAt, created.pat.createdAt)

    // The new token authenticates as the same account.
    const other = client({ token: created.pat.value })
    const me = expectValid('getAccount', await other.getAccount())
    const adminMe = expectValid('getAccount', await admin.getAccount())
    assert.equal(me.account.id, adminMe.account.id)

    expectValid('deletePersonalAccessToken', await admin.deletePersonalAccessToken({ id: created.pat.id }))

    await expectRevoked(() => other.getAccount())
    await expectRevoked(() => other.listWorkspaces({}))
    await expectApiError(other.getAccount(), 401, 'Unauthorized')
    const after = expectValid('listPersonalAccessTokens', await admin.listPersonalAccessTokens({}))
    assert.ok(!after.pats.some((p) => p.id === created.pat.id), 'the deleted token is no longer listed')
  })

  test('a token can delete itself, and then stops working', async () => {
    const created = expectValid('createPersonalAccessToken', await client().createPersonalAccessToken({ note: 'self' }))
    const self = client({ token: created.pat.value })
    expectValid('deletePersonalAccessToken', await self.deletePersonalAccessToken({ id: created.pat.id }))
    await expectRevoked(() => self.getAccount())
  })

  test("deleting another account's token is 404 and leaves it working", async () => {
    const { api } = await newWorkspace()
    const { token } = await newAccount(api, 'developer')
    const theirs = client({ token })
    const pats = expectValid('listPersonalAccessTokens', await theirs.listPersonalAccessTokens({}))
    assert.equal(pats.pats.length, 1)
    await expectApiError(client().deletePersonalAccessToken({ id: pats.pats[0].id }), 404, 'ResourceNotFound')
    expectValid('getAccount', await theirs.getAccount())
  })

  test('deleting an unknown token is 404', async () => {
    await expectApiError(client().deletePersonalAccessToken({ id: 'pat_01ZZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')
  })

  test('a bot API key cannot manage personal access tokens', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    const bak = expectValid('createBotApiKey', await api.createBotApiKey({ botId: bot.id, note: 'k' }))
    const asBot = client({ token: bak.value, workspaceId: ws.id })
    await expectApiError(asBot.listPersonalAccessTokens({}), 403, 'Forbidden')
    await expectApiError(asBot.createPersonalAccessToken({ note: 'x' }), 403, 'Forbidden')
  })
})
