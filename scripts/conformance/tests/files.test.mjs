// Files API: upsert and upload (the client's uploadFile through the
// returned uploadUrl), get, list (tags, ids, indexed, orders, pages),
// metadata, copy, delete, tags and tag values, passages, search, and the
// exact file reference of a file's url; every response validated against
// the reference.
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import { before, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

let bot, files, api, ws

before(async () => {
  ;({ ws, api } = await newWorkspace())
  ;({ bot } = expectValid('createBot', await api.createBot({ name: unique('files') })))
  files = new Client({ apiUrl, token: adminToken(), botId: bot.id })
})

const sha256 = (b) => crypto.createHash('sha256').update(b).digest('hex')

/** download fetches a file's url (an exact file reference) in a bot's scope. */
async function download(url, { token = adminToken(), botId = bot.id } = {}) {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${token}`, 'x-bot-id': botId }, redirect: 'manual' })
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) }
}

async function upload(key, content, props = {}) {
  const res = await files.uploadFile({ key, content, ...props })
  expectValid('upsertFile', res)
  return expectValid('getFile', await files.getFile({ id: res.file.id })).file
}

describe('files', () => {
  test('uploadFile through the uploadUrl, then get, list and download the exact bytes', async () => {
    const key = `docs/${unique('hello')} world.txt`
    const content = 'Hello from the official client.\n'
    const up = await files.uploadFile({ key, content, tags: { kind: 'doc' }, metadata: { n: 1, nested: { ok: true } } })
    expectValid('upsertFile', up)
    assert.equal(up.file.key, key)
    assert.equal(up.file.contentType, 'text/plain')
    assert.equal(up.file.size, Buffer.byteLength(content))

    const { file } = expectValid('getFile', await files.getFile({ id: up.file.id }))
    assert.equal(file.status, 'upload_completed')
    assert.deepEqual(file.tags, { kind: 'doc' })
    assert.deepEqual(file.metadata, { n: 1, nested: { ok: true } })
    assert.deepEqual(file.owner, { type: 'bot', id: bot.id })
    assert.deepEqual(expectValid('getFile', await files.getFile({ id: key })).file, file)

    const url = new URL(file.url)
    assert.equal(url.origin, apiUrl)
    assert.equal(url.pathname, `/v1/files/${file.id}/content`)
    assert.deepEqual([...url.searchParams.keys()], ['size', 'contentType', 'filename', 'checksum', 'expires', 'signature'])
    // Signed: readable without a token (docs/files.md).
    const anonymous = await fetch(file.url)
    assert.equal(anonymous.status, 200)
    assert.equal(await anonymous.text(), content)
    assert.equal(url.searchParams.get('checksum'), sha256(content))
    const got = await download(file.url)
    assert.equal(got.status, 200)
    assert.equal(got.body.toString(), content)
    assert.equal(got.headers.get('content-type'), 'text/plain')

    const list = expectValid('listFiles', await files.listFiles({ ids: [file.id] }))
    assert.deepEqual(list.files.map((f) => f.id), [file.id])
    for (const body of [JSON.stringify(file), JSON.stringify(list)]) {
      assert.ok(!body.includes('/_s3') && !body.includes('platform-files'), 'no storage address in answers')
    }
  })

  test('binary content, explicit content type', async () => {
    const bytes = crypto.randomBytes(4096)
    const file = await upload(unique('blob') + '.bin', bytes, { contentType: 'application/x-test' })
    assert.equal(file.contentType, 'application/x-test')
    const got = await download(file.url)
    assert.equal(got.status, 200)
    assert.ok(got.body.equals(bytes))
  })

  test('an altered file reference is refused, never redirected', async () => {
    const file = await upload(unique('ref') + '.txt', 'exact')
    const url = new URL(file.url)
    const altered = (name, value) => {
      const u = new URL(url)
      u.searchParams.set(name, value)
      return u.toString()
    }
    for (const [u, status] of [
      [altered('size', '6'), 404],
      [altered('contentType', 'text/html'), 404],
      [altered('filename', 'other.txt'), 404],
      [altered('checksum', sha256('other')), 404],
      [url.toString() + '&extra=1', 400],
      [url.toString() + '&size=5', 400],
      [url.toString() + '&pad=' + 'x'.repeat(4096), 400],
    ]) {
      const got = await download(u)
      assert.equal(got.status, status, u)
      const err = JSON.parse(got.body.toString())
      assert.ok(err.id && err.type && err.message && err.code === status)
    }
    const { bot: other } = expectValid('createBot', await api.createBot({}))
    assert.equal((await download(file.url, { botId: other.id })).status, 404)
  })

  test('upserting a key again starts a new generation: the old bytes are gone', async () => {
    const key = unique('gen') + '.txt'
    const first = await upload(key, 'first version')
    const second = await files.upsertFile({ key, size: 14 })
    expectValid('upsertFile', second)
    assert.equal(second.file.id, first.id)
    assert.equal(second.file.status, 'upload_pending')
    assert.equal((await download(first.url)).status, 404)
    const res = await fetch(second.file.uploadUrl, { method: 'PUT', body: 'second version', headers: { 'Content-Type': second.file.contentType } })
    assert.equal(res.status, 200)
    const { file } = expectValid('getFile', await files.getFile({ id: key }))
    assert.equal((await download(file.url)).body.toString(), 'second version')
  })

  test('the upload URL accepts only its content type and size', async () => {
    const { file } = expectValid('upsertFile', await files.upsertFile({ key: unique('strict') + '.txt', size: 5 }))
    for (const [body, type] of [
      ['12345', 'text/html'],
      ['123456', 'text/plain'],
    ]) {
      const res = await fetch(file.uploadUrl, { method: 'PUT', body, headers: { 'Content-Type': type } })
      assert.equal(res.status, 403)
    }
    assert.equal(expectValid('getFile', await files.getFile({ id: file.id })).file.status, 'upload_pending')
  })

  test('listFiles: tags (one, OR, not), indexed, orders, pages', async () => {
    const { bot: b } = expectValid('createBot', await api.createBot({}))
    const c = new Client({ apiUrl, token: adminToken(), botId: b.id })
    const specs = [
      ['a.txt', { color: 'red' }, 3],
      ['b.txt', { color: 'blue' }, 1],
      ['c.txt', { color: 'green' }, 2],
      ['d.txt', {}, 4],
    ]
    for (const [key, tags, size] of specs) {
      expectValid('upsertFile', await c.upsertFile({ key, tags, size, index: key === 'a.txt' }))
    }
    const keys = async (props) => {
      const res = expectValid('listFiles', await c.listFiles(props))
      return res.files.map((f) => f.key)
    }
    assert.deepEqual((await keys({ tags: { color: 'red' } })).sort(), ['a.txt'])
    assert.deepEqual((await keys({ tags: { color: ['red', 'blue'] } })).sort(), ['a.txt', 'b.txt'])
    assert.deepEqual((await keys({ tags: { color: { not: 'red' } } })).sort(), ['b.txt', 'c.txt', 'd.txt'])
    assert.deepEqual((await keys({ tags: JSON.stringify({ color: { not: ['red', 'blue'] } }) })).sort(), ['c.txt', 'd.txt'])
    assert.deepEqual(await keys({ indexed: true }), ['a.txt'])
    assert.deepEqual(await keys({ sortField: 'key', sortDirection: 'asc' }), ['a.txt', 'b.txt', 'c.txt', 'd.txt'])
    assert.deepEqual(await keys({ sortField: 'size', sortDirection: 'desc' }), ['d.txt', 'a.txt', 'c.txt', 'b.txt'])
    assert.deepEqual(await keys({ sortField: 'createdAt', sortDirection: 'asc' }), ['a.txt', 'b.txt', 'c.txt', 'd.txt'])
    // Pages of one, through the client's collection.
    const all = await c.list.files({ sortField: 'key', pageSize: 1 }).collect()
    assert.deepEqual(all.map((f) => f.key), ['a.txt', 'b.txt', 'c.txt', 'd.txt'])
    const page = expectValid('listFiles', await c.listFiles({ sortField: 'key', pageSize: 3 }))
    assert.equal(page.files.length, 3)
    const next = expectValid('listFiles', await c.listFiles({ sortField: 'key', pageSize: 3, nextToken: page.meta.nextToken }))
    assert.deepEqual(next.files.map((f) => f.key), ['d.txt'])
    assert.equal(next.meta.nextToken, undefined)
  })

  test('bad input: 4xx in the error shape, nothing written', async () => {
    const { bot: b } = expectValid('createBot', await api.createBot({}))
    const c = new Client({ apiUrl, token: adminToken(), botId: b.id })
    await expectApiError(c.upsertFile({ key: 'x.txt' }), 400, 'InvalidPayload')
    await expectApiError(c.upsertFile({ key: 'x.txt', size: -1 }), 400, 'InvalidPayload')
    await expectApiError(c.upsertFile({ key: '', size: 1 }), 400, 'InvalidPayload')
    await expectApiError(c.upsertFile({ key: 'x.txt', size: 1, expiresAt: '2000-01-01T00:00:00Z' }), 400, 'InvalidPayload')
    const ids = Array.from({ length: 51 }, (_, i) => `file_${String(i).padStart(26, '0')}`)
    await expectApiError(c.listFiles({ ids }), 400, 'InvalidPayload')
    await expectApiError(c.listFiles({ tags: '{"color":' }), 400, 'InvalidPayload')
    await expectApiError(c.listFiles({ sortField: 'name' }), 400, 'InvalidPayload')
    await expectApiError(c.searchFiles({ query: '' }), 400, 'InvalidPayload')
    await expectApiError(c.getFile({ id: 'nope.txt' }), 404, 'ResourceNotFound')
    await expectApiError(c.deleteFile({ id: 'nope.txt' }), 404, 'ResourceNotFound')
    await expectApiError(c.updateFileMetadata({ id: 'nope.txt', tags: {} }), 404, 'ResourceNotFound')
    assert.deepEqual(expectValid('listFiles', await c.listFiles({})).files, [])
    assert.deepEqual(expectValid('listFileTags', await c.listFileTags({})).tags, [])
  })

  test('updateFileMetadata, tags and tag values, copyFile, deleteFile', async () => {
    const key = unique('meta') + '.txt'
    const file = await upload(key, 'metadata test', { tags: { color: 'red', size: 's' }, metadata: { a: 1, b: 2 } })
    const upd = expectValid(
      'updateFileMetadata',
      await files.updateFileMetadata({ id: file.id, tags: { size: null, shape: 'round' }, metadata: { a: null, c: 3 } }),
    )
    assert.deepEqual(upd.file.tags, { color: 'red', shape: 'round' })
    assert.deepEqual(upd.file.metadata, { b: 2, c: 3 })
    assert.equal(upd.file.url, file.url)

    const tags = expectValid('listFileTags', await files.listFileTags({})).tags
    assert.ok(tags.includes('color') && tags.includes('shape'))
    const values = expectValid('listFileTagValues', await files.listFileTagValues({ tag: 'color' })).values
    assert.ok(values.includes('red'))

    const dest = unique('copy') + '.txt'
    const copy = expectValid('copyFile', await files.copyFile({ idOrKey: key, destinationKey: dest }))
    assert.equal(copy.file.key, dest)
    assert.notEqual(copy.file.id, file.id)
    assert.equal(copy.file.status, 'upload_completed')
    assert.equal((await download(copy.file.url)).body.toString(), 'metadata test')
    await expectApiError(files.copyFile({ idOrKey: key, destinationKey: dest }), 409, 'AlreadyExists')
    expectValid('copyFile', await files.copyFile({ idOrKey: key, destinationKey: dest, overwrite: true }))

    expectValid('deleteFile', await files.deleteFile({ id: copy.file.id }))
    await expectApiError(files.getFile({ id: copy.file.id }), 404, 'ResourceNotFound')
    assert.equal((await download(copy.file.url)).status, 404)
  })

  test('indexing, passages and search', async () => {
    const { bot: b } = expectValid('createBot', await api.createBot({}))
    const c = new Client({ apiUrl, token: adminToken(), botId: b.id })
    const md = '# Handbook\n\nOur robots water the garden every morning.\n\n## Holidays\n\nThe office closes in August.\n'
    const up = await c.uploadFile({ key: 'handbook.md', content: md, index: true, tags: { team: 'ops' } })
    expectValid('upsertFile', up)
    const { file } = expectValid('getFile', await c.getFile({ id: up.file.id }))
    assert.equal(file.status, 'indexing_completed')
    assert.equal(file.indexingStack, 'v1')

    const passages = expectValid('listFilePassages', await c.listFilePassages({ id: file.id, limit: 2 }))
    assert.equal(passages.passages.length, 2)
    assert.equal(passages.passages[0].content, 'Handbook')
    assert.equal(passages.passages[0].meta.subtype, 'title')
    const rest = expectValid('listFilePassages', await c.listFilePassages({ id: file.id, limit: 10, nextToken: passages.meta.nextToken }))
    assert.equal(rest.passages.length, 2)

    const found = expectValid('searchFiles', await c.searchFiles({ query: 'When does the office close?', contextDepth: 0, includeBreadcrumb: true }))
    assert.ok(found.passages.length >= 1)
    assert.equal(found.passages[0].content, 'Handbook > Holidays\n\nThe office closes in August.')
    assert.equal(found.passages[0].file.id, file.id)
    const ctx = expectValid('searchFiles', await c.searchFiles({ query: 'robots garden', withContext: true, tags: { team: 'ops' } }))
    assert.ok(ctx.passages[0].context.some((p) => p.type === 'current'))
    const none = expectValid('searchFiles', await c.searchFiles({ query: 'robots', tags: { team: 'sales' } }))
    assert.deepEqual(none.passages, [])
    const merged = expectValid('searchFiles', await c.searchFiles({ query: 'robots office', consolidate: true }))
    assert.equal(merged.passages.length, 1)
    assert.equal(merged.passages[0].meta.type, 'consolidated')

    expectValid(
      'setFilePassages',
      await c.setFilePassages({ id: file.id, passages: [{ content: 'Replaced passage about zebras.' }, { content: 'Second', type: 'paragraph' }] }),
    )
    const replaced = expectValid('listFilePassages', await c.listFilePassages({ id: file.id }))
    assert.deepEqual(replaced.passages.map((p) => p.content), ['Replaced passage about zebras.', 'Second'])
    assert.equal(expectValid('searchFiles', await c.searchFiles({ query: 'zebras' })).passages.length, 1)
    assert.deepEqual(expectValid('searchFiles', await c.searchFiles({ query: 'robots' })).passages, [])

    const png = await c.uploadFile({ key: 'image.png', content: new Uint8Array([137, 80, 78, 71]), index: true })
    const failed = expectValid('getFile', await c.getFile({ id: png.file.id })).file
    assert.equal(failed.status, 'indexing_failed')
    assert.ok(failed.failedStatusReason)
  })

  test('roles and tenancy: viewers read, other bots see nothing', async () => {
    const file = await upload(unique('role') + '.txt', 'role test')
    const { token } = await newAccount(api, 'viewer')
    const viewer = new Client({ apiUrl, token, botId: bot.id })
    expectValid('getFile', await viewer.getFile({ id: file.id }))
    expectValid('listFiles', await viewer.listFiles({}))
    assert.equal((await download(file.url, { token })).status, 200)
    await expectApiError(viewer.upsertFile({ key: 'v.txt', size: 1 }), 403, 'Forbidden')
    await expectApiError(viewer.updateFileMetadata({ id: file.id, tags: { a: 'b' } }), 403, 'Forbidden')
    await expectApiError(viewer.deleteFile({ id: file.id }), 403, 'Forbidden')
    await expectApiError(viewer.copyFile({ idOrKey: file.id, destinationKey: 'v2.txt' }), 403, 'Forbidden')

    const { api: otherApi } = await newWorkspace()
    const { bot: foreign } = expectValid('createBot', await otherApi.createBot({}))
    const stranger = new Client({ apiUrl, token: adminToken(), botId: foreign.id })
    await expectApiError(stranger.getFile({ id: file.id }), 404, 'ResourceNotFound')
    await expectApiError(stranger.deleteFile({ id: file.id }), 404, 'ResourceNotFound')
    assert.deepEqual(expectValid('listFiles', await stranger.listFiles({ ids: [file.id] })).files, [])
    assert.equal((await download(file.url, { botId: foreign.id })).status, 404)
    assert.ok(ws.id)
  })
})
