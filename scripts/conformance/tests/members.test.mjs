// Workspace members: listWorkspaceMembers, createWorkspaceMember,
// getWorkspaceMember, updateWorkspaceMember, deleteWorkspaceMember; roles.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, invitedToken, newAccount, newWorkspace, uniqueEmail } from '../lib/env.mjs'

async function allMembers(api) {
  const out = []
  let nextToken
  do {
    const page = expectValid('listWorkspaceMembers', await api.listWorkspaceMembers({ nextToken }))
    out.push(...page.members)
    nextToken = page.meta.nextToken
  } while (nextToken)
  return out
}

describe('workspace members', () => {
  test('the creator is the owner; getWorkspaceMember answers for the caller', async () => {
    const { api } = await newWorkspace()
    const me = expectValid('getAccount', await client().getAccount()).account
    const members = await allMembers(api)
    assert.equal(members.length, 1)
    assert.equal(members[0].role, 'owner')
    assert.equal(members[0].userId, me.id)
    assert.equal(members[0].email, me.email)
    const mine = expectValid('getWorkspaceMember', await api.getWorkspaceMember())
    assert.deepEqual(mine, members[0])
  })

  test('invite, list, get as the invited account, change role, remove', async () => {
    const { ws, api } = await newWorkspace()
    const email = uniqueEmail('member')
    const m = expectValid('createWorkspaceMember', await api.createWorkspaceMember({ email, role: 'viewer' }))
    assert.equal(m.email, email)
    assert.equal(m.role, 'viewer')

    const members = await allMembers(api)
    assert.equal(members.length, 2)
    assert.deepEqual(
      members.find((x) => x.id === m.id),
      m,
    )

    // The invitation carries the new account's first token.
    const token = await invitedToken(email)
    const theirs = client({ token, workspaceId: ws.id })
    const self = expectValid('getWorkspaceMember', await theirs.getWorkspaceMember())
    assert.equal(self.id, m.id)
    assert.equal(self.role, 'viewer')
    const acct = expectValid('getAccount', await theirs.getAccount()).account
    assert.equal(acct.id, m.userId)
    const wsList = expectValid('listWorkspaces', await theirs.listWorkspaces({}))
    assert.deepEqual(
      wsList.workspaces.map((w) => w.id),
      [ws.id],
    )

    const promoted = expectValid('updateWorkspaceMember', await api.updateWorkspaceMember({ id: m.id, role: 'developer' }))
    assert.equal(promoted.id, m.id)
    assert.equal(promoted.role, 'developer')
    assert.equal(expectValid('getWorkspaceMember', await theirs.getWorkspaceMember()).role, 'developer')

    expectValid('deleteWorkspaceMember', await api.deleteWorkspaceMember({ id: m.id }))
    assert.ok(!(await allMembers(api)).some((x) => x.id === m.id))
    // A removed member no longer sees the workspace.
    await expectApiError(theirs.getWorkspaceMember(), 404, 'ResourceNotFound')
    await expectApiError(theirs.getWorkspace({ id: ws.id }), 404, 'ResourceNotFound')
  })

  test('every role can be granted by an owner', async () => {
    const { api } = await newWorkspace()
    for (const role of ['viewer', 'billing', 'developer', 'manager', 'administrator', 'owner']) {
      const { member, email } = await newAccount(api, role)
      assert.equal(member.role, role)
      assert.equal(member.email, email)
    }
    const members = await allMembers(api)
    assert.equal(members.length, 7)
  })

  test('inviting an existing member again is 409', async () => {
    const { api } = await newWorkspace()
    const { email } = await newAccount(api, 'viewer')
    await expectApiError(api.createWorkspaceMember({ email, role: 'developer' }), 409)
  })

  test('listWorkspaceMembers pages with pageSize and nextToken', async () => {
    const { api } = await newWorkspace()
    const ids = [expectValid('getWorkspaceMember', await api.getWorkspaceMember()).id]
    for (let i = 0; i < 4; i++) ids.push((await newAccount(api, 'viewer')).member.id)
    const seen = []
    let nextToken
    let pages = 0
    do {
      const page = expectValid('listWorkspaceMembers', await api.listWorkspaceMembers({ pageSize: 2, nextToken }))
      assert.ok(page.members.length <= 2)
      seen.push(...page.members.map((m) => m.id))
      nextToken = page.meta.nextToken
      assert.ok(++pages <= 10, 'pagination terminates')
    } while (nextToken)
    assert.equal(seen.length, ids.length)
    assert.deepEqual(new Set(seen), new Set(ids))
    const collected = await api.list.workspaceMembers({ pageSize: 3 }).collect()
    for (const m of collected) expectValid('getWorkspaceMember', m)
    assert.deepEqual(new Set(collected.map((m) => m.id)), new Set(ids))
    await expectApiError(api.listWorkspaceMembers({ pageSize: 0 }), 400)
    await expectApiError(api.listWorkspaceMembers({ pageSize: 101 }), 400)
    await expectApiError(api.listWorkspaceMembers({ nextToken: 'forged.token' }), 400)
  })

  test('a viewer reads members but cannot change them (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { token } = await newAccount(api, 'viewer')
    const other = await newAccount(api, 'developer')
    const viewer = client({ token, workspaceId: ws.id })
    expectValid('listWorkspaceMembers', await viewer.listWorkspaceMembers({}))
    await expectApiError(viewer.createWorkspaceMember({ email: uniqueEmail('nope'), role: 'viewer' }), 403, 'Forbidden')
    await expectApiError(viewer.updateWorkspaceMember({ id: other.member.id, role: 'viewer' }), 403, 'Forbidden')
    await expectApiError(viewer.deleteWorkspaceMember({ id: other.member.id }), 403, 'Forbidden')
    assert.equal((await allMembers(api)).length, 3)
  })

  test('a member may leave on their own', async () => {
    const { ws, api } = await newWorkspace()
    const { token, member } = await newAccount(api, 'viewer')
    const viewer = client({ token, workspaceId: ws.id })
    expectValid('deleteWorkspaceMember', await viewer.deleteWorkspaceMember({ id: member.id }))
    await expectApiError(viewer.listWorkspaceMembers({}), 404, 'ResourceNotFound')
    assert.equal((await allMembers(api)).length, 1)
  })

  test('an administrator manages members but cannot grant, change or remove the owner role (403)', async () => {
    const { ws, api } = await newWorkspace()
    const { token } = await newAccount(api, 'administrator')
    const administrator = client({ token, workspaceId: ws.id })
    const added = expectValid(
      'createWorkspaceMember',
      await administrator.createWorkspaceMember({ email: uniqueEmail('by-admin'), role: 'developer' }),
    )
    expectValid('updateWorkspaceMember', await administrator.updateWorkspaceMember({ id: added.id, role: 'viewer' }))
    await expectApiError(administrator.updateWorkspaceMember({ id: added.id, role: 'owner' }), 403, 'Forbidden')
    await expectApiError(
      administrator.createWorkspaceMember({ email: uniqueEmail('owner'), role: 'owner' }),
      403,
      'Forbidden',
    )
    const owner = expectValid('getWorkspaceMember', await api.getWorkspaceMember())
    await expectApiError(administrator.updateWorkspaceMember({ id: owner.id, role: 'viewer' }), 403, 'Forbidden')
    await expectApiError(administrator.deleteWorkspaceMember({ id: owner.id }), 403, 'Forbidden')
    expectValid('deleteWorkspaceMember', await administrator.deleteWorkspaceMember({ id: added.id }))
  })

  test('the last owner can be neither demoted nor removed (403); with a second owner they can', async () => {
    const { api } = await newWorkspace()
    const owner = expectValid('getWorkspaceMember', await api.getWorkspaceMember())
    await expectApiError(api.updateWorkspaceMember({ id: owner.id, role: 'administrator' }), 403, 'Forbidden')
    await expectApiError(api.deleteWorkspaceMember({ id: owner.id }), 403, 'Forbidden')
    assert.equal(expectValid('getWorkspaceMember', await api.getWorkspaceMember()).role, 'owner')

    const second = await newAccount(api, 'owner')
    assert.equal(second.member.role, 'owner')
    const demoted = expectValid('updateWorkspaceMember', await api.updateWorkspaceMember({ id: owner.id, role: 'administrator' }))
    assert.equal(demoted.role, 'administrator')
  })

  test("members of another workspace are 404", async () => {
    const { api } = await newWorkspace()
    const { ws: foreign, api: foreignApi } = await newWorkspace()
    const foreignMember = (await newAccount(foreignApi, 'viewer')).member
    const { token } = await newAccount(api, 'owner')
    const stranger = client({ token, workspaceId: foreign.id })
    await expectApiError(stranger.listWorkspaceMembers({}), 404, 'ResourceNotFound')
    await expectApiError(stranger.getWorkspaceMember(), 404, 'ResourceNotFound')
    await expectApiError(stranger.updateWorkspaceMember({ id: foreignMember.id, role: 'owner' }), 404, 'ResourceNotFound')
    await expectApiError(stranger.deleteWorkspaceMember({ id: foreignMember.id }), 404, 'ResourceNotFound')
    // A member id of workspace B through workspace A is unknown there.
    await expectApiError(api.deleteWorkspaceMember({ id: foreignMember.id }), 404, 'ResourceNotFound')
    await expectApiError(api.updateWorkspaceMember({ id: foreignMember.id, role: 'viewer' }), 404, 'ResourceNotFound')
  })
})
