// Workspaces: createWorkspace, getWorkspace, listWorkspaces, updateWorkspace,
// deleteWorkspace; foreign workspaces, roles, pagination.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

describe('workspaces', () => {
  test('create, get, list, update, delete', async () => {
    const admin = client()
    const me = expectValid('getAccount', await admin.getAccount()).account
    const name = unique('ws')
    const ws = expectValid('createWorkspace', await admin.createWorkspace({ name }))
    assert.equal(ws.name, name)
    assert.equal(ws.ownerId, me.id)
    assert.equal(ws.botCount, 0)

    const got = expectValid('getWorkspace', await admin.getWorkspace({ id: ws.id }))
    assert.deepEqual(got, ws)

    const all = []
    let nextToken
    do {
      const page = expectValid('listWorkspaces', await admin.listWorkspaces({ nextToken }))
      all.push(...page.workspaces)
      nextToken = page.meta.nextToken
    } while (nextToken)
    assert.ok(all.some((w) => w.id === ws.id), 'the new workspace is listed')

    const newName = unique('renamed')
    const updated = expectValid('updateWorkspace', await admin.updateWorkspace({ id: ws.id, name: newName, about: 'about it' }))
    assert.equal(updated.id, ws.id)
    assert.equal(updated.name, newName)
    assert.equal(updated.about, 'about it')
    assert.ok(updated.updatedAt >= ws.updatedAt)
    const again = expectValid('getWorkspace', await admin.getWorkspace({ id: ws.id }))
    assert.equal(again.name, newName)

    expectValid('deleteWorkspace', await admin.deleteWorkspace({ id: ws.id }))
    await expectApiError(admin.getWorkspace({ id: ws.id }), 404, 'ResourceNotFound')
    const after = expectValid('listWorkspaces', await admin.listWorkspaces({ pageSize: 100 }))
    assert.ok(!after.workspaces.some((w) => w.id === ws.id), 'the deleted workspace is no longer listed')
  })

  test('updateWorkspace sets every field of its body', async () => {
    const { ws } = await newWorkspace()
    const patch = {
      name: unique('all'),
      spendingLimit: 250,
      about: 'all about it',
      profilePicture: 'https://example.com/p.png',
      contactEmail: 'team@example.com',
      website: 'https://example.com',
      socialAccounts: ['https://x.com/example', 'https://github.com/example'],
      isPublic: true,
      handle: unique('all').replace(/-/g, ''),
    }
    const updated = expectValid('updateWorkspace', await client().updateWorkspace({ id: ws.id, ...patch }))
    for (const [k, v] of Object.entries(patch)) assert.deepEqual(updated[k], v, k)
    assert.deepEqual(expectValid('getWorkspace', await client().getWorkspace({ id: ws.id })), updated)
    // An empty patch changes nothing.
    const same = expectValid('updateWorkspace', await client().updateWorkspace({ id: ws.id }))
    for (const [k, v] of Object.entries(patch)) assert.deepEqual(same[k], v, k)
  })

  test('listWorkspaces by handle', async () => {
    const { ws } = await newWorkspace()
    const handle = unique('h').replace(/-/g, '')
    const updated = expectValid('updateWorkspace', await client().updateWorkspace({ id: ws.id, handle }))
    assert.equal(updated.handle, handle)
    const res = expectValid('listWorkspaces', await client().listWorkspaces({ handle }))
    assert.deepEqual(
      res.workspaces.map((w) => w.id),
      [ws.id],
    )
    const none = expectValid('listWorkspaces', await client().listWorkspaces({ handle: unique('nobody').replace(/-/g, '') }))
    assert.deepEqual(none.workspaces, [])
  })

  test('listWorkspaces pages with pageSize and nextToken', async () => {
    const { api } = await newWorkspace()
    // A fresh account with exactly three workspaces.
    const { token } = await newAccount(api, 'viewer')
    const mine = client({ token })
    const first = expectValid('listWorkspaces', await mine.listWorkspaces({}))
    const created = []
    for (let i = 0; i < 3; i++) created.push(expectValid('createWorkspace', await mine.createWorkspace({ name: unique('p') })).id)
    const expected = new Set([...first.workspaces.map((w) => w.id), ...created])

    const seen = []
    let nextToken
    let pages = 0
    do {
      const page = expectValid('listWorkspaces', await mine.listWorkspaces({ pageSize: 2, nextToken }))
      assert.ok(page.workspaces.length <= 2)
      seen.push(...page.workspaces.map((w) => w.id))
      nextToken = page.meta.nextToken
      assert.ok(++pages <= 10, 'pagination terminates')
    } while (nextToken)
    assert.equal(seen.length, expected.size, 'no workspace is listed twice')
    assert.deepEqual(new Set(seen), expected)

    // The client's own collection walks the pages the same way.
    const collected = await mine.list.workspaces({ pageSize: 1 }).collect()
    for (const w of collected) expectValid('getWorkspace', w)
    assert.deepEqual(new Set(collected.map((w) => w.id)), expected)
  })

  test('listWorkspaces rejects pageSize 0 and 101, and a forged nextToken', async () => {
    const admin = client()
    await expectApiError(admin.listWorkspaces({ pageSize: 0 }), 400)
    await expectApiError(admin.listWorkspaces({ pageSize: 101 }), 400)
    await expectApiError(admin.listWorkspaces({ nextToken: 'forged' }), 400)
  })

  test("another account's workspace is 404", async () => {
    const { ws } = await newWorkspace()
    // An account that is a member of some other workspace only.
    const { api: elsewhere } = await newWorkspace()
    const { token } = await newAccount(elsewhere, 'owner')
    const stranger = client({ token })
    await expectApiError(stranger.getWorkspace({ id: ws.id }), 404, 'ResourceNotFound')
    await expectApiError(stranger.updateWorkspace({ id: ws.id, name: 'mine now' }), 404, 'ResourceNotFound')
    await expectApiError(stranger.deleteWorkspace({ id: ws.id }), 404, 'ResourceNotFound')
    const list = expectValid('listWorkspaces', await stranger.listWorkspaces({}))
    assert.ok(!list.workspaces.some((w) => w.id === ws.id))
    // Nothing changed.
    const got = expectValid('getWorkspace', await client().getWorkspace({ id: ws.id }))
    assert.equal(got.name, ws.name)
  })

  test('an unknown workspace id is 404', async () => {
    await expectApiError(client().getWorkspace({ id: 'wkspace_01ZZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')
    await expectApiError(client().getWorkspace({ id: 'nonsense' }), 404, 'ResourceNotFound')
  })

  test('a viewer reads but cannot update or delete (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { token } = await newAccount(api, 'viewer')
    const viewer = client({ token })
    expectValid('getWorkspace', await viewer.getWorkspace({ id: ws.id }))
    await expectApiError(viewer.updateWorkspace({ id: ws.id, name: 'viewer was here' }), 403, 'Forbidden')
    await expectApiError(viewer.deleteWorkspace({ id: ws.id }), 403, 'Forbidden')
    const got = expectValid('getWorkspace', await client().getWorkspace({ id: ws.id }))
    assert.equal(got.name, ws.name)
  })

  test('an administrator updates but only an owner deletes', async () => {
    const { ws, api } = await newWorkspace()
    const { token } = await newAccount(api, 'administrator')
    const administrator = client({ token })
    const updated = expectValid('updateWorkspace', await administrator.updateWorkspace({ id: ws.id, name: unique('by-admin') }))
    assert.notEqual(updated.name, ws.name)
    await expectApiError(administrator.deleteWorkspace({ id: ws.id }), 403, 'Forbidden')
    expectValid('deleteWorkspace', await client().deleteWorkspace({ id: ws.id }))
  })

  test('a workspace with bots cannot be deleted (409)', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = expectValid('createBot', await api.createBot({}))
    await expectApiError(client().deleteWorkspace({ id: ws.id }), 409)
    expectValid('getWorkspace', await client().getWorkspace({ id: ws.id }))
    expectValid('deleteBot', await api.deleteBot({ id: bot.id }))
    expectValid('deleteWorkspace', await client().deleteWorkspace({ id: ws.id }))
  })

  test('createWorkspace and updateWorkspace reject an empty name (400)', async () => {
    await expectApiError(client().createWorkspace({ name: '' }), 400)
    const { ws } = await newWorkspace()
    await expectApiError(client().updateWorkspace({ id: ws.id, name: '' }), 400)
  })
})
