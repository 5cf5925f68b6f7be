// Tables API through the official client, on one bot (x-bot-id): tables
// (list, create, get, getOrCreate, update, rename a column, duplicate,
// jobs, export, import, delete) and rows (create, get, update, upsert,
// find with filters, groups and search, delete). Every response is
// validated against the reference (with the specification's additions:
// boolean additionalProperties, duplicateTable's job).
import assert from 'node:assert/strict'
import { before, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { Client, adminToken, apiUrl, expectApiError, newAccount, newWorkspace, unique } from '../lib/env.mjs'

let api, bot, tables

before(async () => {
  ;({ api } = await newWorkspace())
  ;({ bot } = expectValid('createBot', await api.createBot({ name: unique('tables') })))
  tables = new Client({ apiUrl, token: adminToken(), botId: bot.id })
})

// tableName returns a fresh valid table name.
const tableName = (prefix = 't') => `${prefix}${unique('').replace(/-/g, '')}Table`

const schema = {
  type: 'object',
  properties: {
    name: { type: 'string', 'x-zui': { searchable: true } },
    age: { type: 'number' },
    active: { type: 'boolean' },
    joined: { type: 'string', format: 'date-time' },
    address: { type: 'object', properties: { city: { type: 'string' } } },
  },
  required: ['name'],
}

const people = [
  { name: 'Ada Lovelace', age: 36, active: true, joined: '2024-01-10T00:00:00Z', address: { city: 'London' } },
  { name: 'Alan Turing', age: 41, active: false, joined: '2023-06-01T12:00:00Z', address: { city: 'Wilmslow' } },
  { name: 'Grace Hopper', age: 85, active: true, joined: '2022-12-09T00:00:00Z', address: { city: 'Arlington' } },
  { name: 'Barbara Liskov', age: 84, active: true },
]

async function peopleTable(extra = {}) {
  const name = tableName('people')
  const { table } = expectValid('createTable', await tables.createTable({ name, schema, ...extra }))
  const created = expectValid('createTableRows', await tables.createTableRows({ table: name, rows: people }))
  assert.equal(created.rows.length, people.length)
  return { name, table, rows: created.rows }
}

describe('tables: tables', () => {
  test('create, get, list, getOrCreate, update, rename a column, delete', async () => {
    const name = tableName()
    const { table } = expectValid('createTable', await tables.createTable({ name, schema, tags: { team: 'qa' }, factor: 2 }))
    assert.equal(table.name, name)
    assert.equal(table.factor, 2)
    assert.deepEqual(table.tags, { team: 'qa' })
    assert.equal(table.schema.properties.name['x-zui'].searchable, true)
    assert.equal(typeof table.schema.properties.age['x-zui'].index, 'number')

    const got = expectValid('getTable', await tables.getTable({ table: name }))
    assert.deepEqual(got.table, table)
    assert.equal(got.rows, 0)
    assert.equal(got.stale, 0)
    assert.equal(got.indexing, 0)
    assert.deepEqual(expectValid('getTable', await tables.getTable({ table: table.id })).table, table)

    const listed = expectValid('listTables', await tables.listTables({}))
    assert.ok(listed.tables.some((t) => t.id === table.id))
    const byTag = expectValid('listTables', await tables.listTables({ tags: { team: 'qa' } }))
    assert.deepEqual(
      byTag.tables.map((t) => t.id),
      [table.id],
    )
    assert.deepEqual(expectValid('listTables', await tables.listTables({ tags: { team: 'nope' } })).tables, [])

    const existing = expectValid('getOrCreateTable', await tables.getOrCreateTable({ table: name, schema }))
    assert.equal(existing.created, false)
    assert.equal(existing.table.id, table.id)
    const other = tableName('other')
    const created = expectValid('getOrCreateTable', await tables.getOrCreateTable({ table: other, schema }))
    assert.equal(created.created, true)
    assert.equal(created.rows, 0)

    const updated = expectValid(
      'updateTable',
      await tables.updateTable({
        table: name,
        schema: { properties: { email: { type: 'string' }, active: null } },
        tags: { team: 'core' },
        isComputeEnabled: true,
      }),
    )
    assert.equal(updated.table.schema.properties.email.type, 'string')
    assert.equal(updated.table.schema.properties.active, undefined)
    assert.equal(updated.table.schema.properties.name.type, 'string')
    assert.deepEqual(updated.table.tags, { team: 'core' })
    assert.deepEqual(updated.staleColumns, [])

    const renamed = expectValid('renameTableColumn', await tables.renameTableColumn({ table: name, name: 'age', newName: 'years' }))
    assert.equal(renamed.table.schema.properties.years.type, 'number')
    assert.equal(renamed.table.schema.properties.age, undefined)

    expectValid('deleteTable', await tables.deleteTable({ table: name }))
    await expectApiError(tables.getTable({ table: name }), 404, 'ResourceNotFound')
    await expectApiError(tables.deleteTable({ table: name }), 404, 'ResourceNotFound')
    expectValid('deleteTable', await tables.deleteTable({ table: other }))
  })

  test('a strict table refuses unknown columns; a frozen table keeps its schema', async () => {
    const name = tableName('strict')
    const { table } = expectValid(
      'createTable',
      await tables.createTable({
        name,
        frozen: true,
        schema: { type: 'object', additionalProperties: false, properties: { a: { type: 'string' } } },
      }),
    )
    assert.equal(table.schema.additionalProperties, false)
    await expectApiError(tables.createTableRows({ table: name, rows: [{ a: 'x', b: 1 }] }), 400, 'InvalidPayload')
    expectValid('createTableRows', await tables.createTableRows({ table: name, rows: [{ a: 'x' }] }))
    await expectApiError(tables.updateTable({ table: name, schema: { properties: { b: { type: 'number' } } } }), 409)
    await expectApiError(tables.renameTableColumn({ table: name, name: 'a', newName: 'b' }), 409)
    expectValid('deleteTable', await tables.deleteTable({ table: name }))
  })

  test('invalid schemas and names are refused', async () => {
    for (const bad of [
      { name: tableName(), schema: { type: 'object', properties: { id: { type: 'string' } } } },
      { name: tableName(), schema: { type: 'object', properties: { a: { type: 'text' } } } },
      { name: tableName(), schema: { type: 'object', properties: { a: {} } } },
      { name: tableName(), schema: { type: 'object' } },
      { name: 'not a name', schema },
    ]) {
      await expectApiError(tables.createTable(bad), 400, 'InvalidPayload')
    }
  })

  test('duplicate a table, with its rows or its schema only', async () => {
    const { name, table } = await peopleTable({ keyColumn: 'name' })
    const copyName = tableName('copy')
    const dup = expectValid('duplicateTable', await tables.duplicateTable({ sourceTableId: table.id, tableName: copyName }))
    assert.equal(dup.table.name, copyName)
    assert.equal(dup.table.keyColumn, 'name')
    assert.equal(dup.rows, people.length)
    assert.equal(dup.job.status, 'completed')
    const src = expectValid('findTableRows', await tables.findTableRows({ table: name }))
    const copy = expectValid('findTableRows', await tables.findTableRows({ table: copyName }))
    assert.deepEqual(
      copy.rows.map((r) => [r.id, r.name, r.age]),
      src.rows.map((r) => [r.id, r.name, r.age]),
    )
    const jobs = expectValid('getTableJobs', await tables.getTableJobs({ table: copyName }))
    assert.equal(jobs.jobs.length, 1)
    assert.equal(jobs.jobs[0].id, dup.job.id)
    assert.equal(jobs.jobs[0].status, 'completed')

    const schemaOnly = expectValid('duplicateTable', await tables.duplicateTable({ sourceTableId: name, tableName: tableName('empty'), schemaOnly: true }))
    assert.equal(expectValid('getTable', await tables.getTable({ table: schemaOnly.table.id })).rows, 0)
    await expectApiError(tables.duplicateTable({ sourceTableId: name, tableName: copyName }), 409, 'AlreadyExists')
  })

  test('export and import, where the deployment stores files', async () => {
    const { name } = await peopleTable()
    let exported
    try {
      exported = await tables.exportTable({ table: name, format: 'json', compress: false })
    } catch (e) {
      // Without the Files API's storage the operation is not available.
      assert.equal(e.code, 405, `exportTable: ${e.message}`)
      await expectApiError(tables.importTable({ table: name, fileId: 'file_01ARZ3NDEKTSV4RRFFQ69G5FAV' }), 405)
      return
    }
    expectValid('exportTable', exported)
    assert.equal(exported.job.type, 'export')
    assert.equal(exported.job.status, 'completed')
    const target = tableName('imported')
    expectValid('duplicateTable', await tables.duplicateTable({ sourceTableId: name, tableName: target, schemaOnly: true }))
    const imported = expectValid('importTable', await tables.importTable({ table: target, fileId: exported.job.outputFileId }))
    assert.equal(imported.job.status, 'completed')
    assert.equal(expectValid('getTable', await tables.getTable({ table: target })).rows, people.length)
  })
})

describe('tables: rows', () => {
  test('create, get, update, upsert, delete', async () => {
    const { name, rows } = await peopleTable()
    assert.deepEqual(
      rows.map((r) => r.id),
      [1, 2, 3, 4],
    )
    assert.equal(rows[0].name, 'Ada Lovelace')
    assert.deepEqual(rows[0].computed, {})

    const partial = expectValid('createTableRows', await tables.createTableRows({ table: name, rows: [{ name: 'Edsger' }, { age: 3 }] }))
    assert.equal(partial.rows.length, 1)
    assert.equal(partial.errors.length, 1)

    const { row } = expectValid('getTableRow', await tables.getTableRow({ table: name, id: 1 }))
    assert.equal(row.address.city, 'London')
    await expectApiError(tables.getTableRow({ table: name, id: 999 }), 404, 'ResourceNotFound')

    const upd = expectValid('updateTableRows', await tables.updateTableRows({ table: name, rows: [{ id: 1, age: 37 }, { id: 999, age: 1 }] }))
    assert.equal(upd.rows.length, 1)
    assert.equal(upd.rows[0].age, 37)
    assert.equal(upd.rows[0].name, 'Ada Lovelace')
    assert.equal(upd.errors.length, 1)

    const up = expectValid(
      'upsertTableRows',
      await tables.upsertTableRows({ table: name, keyColumn: 'name', rows: [{ name: 'Alan Turing', age: 42 }, { name: 'Dennis Ritchie', age: 70 }] }),
    )
    assert.equal(up.updated.length, 1)
    assert.equal(up.updated[0].id, 2)
    assert.equal(up.inserted.length, 1)

    const del = expectValid('deleteTableRows', await tables.deleteTableRows({ table: name, ids: [1, 2] }))
    assert.equal(del.deletedRows, 2)
    const byFilter = expectValid('deleteTableRows', await tables.deleteTableRows({ table: name, filter: { age: { $gt: 80 } } }))
    assert.equal(byFilter.deletedRows, 2)
    const all = expectValid('deleteTableRows', await tables.deleteTableRows({ table: name, deleteAllRows: true }))
    assert.equal(all.deletedRows, 2)
    assert.equal(expectValid('getTable', await tables.getTable({ table: name })).rows, 0)
  })

  test('find: filters, order, select, pages', async () => {
    const { name } = await peopleTable()
    const find = async (req) => expectValid('findTableRows', await tables.findTableRows({ table: name, ...req }))
    const ids = (res) => res.rows.map((r) => r.id)
    assert.deepEqual(ids(await find({ filter: { active: true, age: { $gte: 80 } } })), [3, 4])
    assert.deepEqual(ids(await find({ filter: { $or: [{ name: 'Ada Lovelace' }, { 'address.city': 'Wilmslow' }] } })), [1, 2])
    assert.deepEqual(ids(await find({ filter: { name: { $regex: '^g', $options: 'i' } } })), [3])
    assert.deepEqual(ids(await find({ filter: { joined: { $lt: '2024-01-01' } } })), [2, 3])
    assert.deepEqual(ids(await find({ filter: { age: { $in: [36, 84] } } })), [1, 4])
    assert.deepEqual(ids(await find({ filter: { joined: { $exists: false } } })), [4])
    const page = await find({ orderBy: 'age', orderDirection: 'desc', limit: 2, offset: 1 })
    assert.deepEqual(ids(page), [4, 2])
    assert.equal(page.hasMore, true)
    assert.equal(page.offset, 1)
    assert.equal(page.limit, 2)
    const sel = await find({ select: ['address.city'], limit: 1 })
    assert.deepEqual(Object.keys(sel.rows[0]).sort(), ['address', 'computed', 'createdAt', 'id', 'stale', 'updatedAt'])
    await expectApiError(tables.findTableRows({ table: name, filter: { nope: 1 } }), 400, 'InvalidPayload')
    await expectApiError(tables.findTableRows({ table: name, filter: { $where: 'true' } }), 400, 'InvalidPayload')
    await expectApiError(tables.findTableRows({ table: name, limit: 1001 }), 400, 'InvalidPayload')
  })

  test('find: group and search', async () => {
    const { name } = await peopleTable()
    const grouped = expectValid('findTableRows', await tables.findTableRows({ table: name, group: { active: 'key', age: ['avg', 'max'], id: 'count' } }))
    const actives = grouped.rows.find((g) => g.activeKey === true)
    assert.equal(actives.idCount, 3)
    assert.equal(actives.ageMax, 85)
    const found = expectValid('findTableRows', await tables.findTableRows({ table: name, search: 'grace hopper', limit: 4 }))
    assert.equal(found.rows[0].name, 'Grace Hopper')
    for (const r of found.rows) {
      assert.ok(r.similarity >= 0 && r.similarity <= 1)
    }
    assert.ok(found.rows[0].similarity > found.rows[1].similarity)
  })

  test('roles and tenancy', async () => {
    const { name } = await peopleTable()
    const { token: viewerToken } = await newAccount(api, 'viewer')
    const viewer = new Client({ apiUrl, token: viewerToken, botId: bot.id })
    expectValid('findTableRows', await viewer.findTableRows({ table: name }))
    await expectApiError(viewer.createTableRows({ table: name, rows: [{ name: 'x' }] }), 403, 'Forbidden')
    await expectApiError(viewer.deleteTable({ table: name }), 403, 'Forbidden')

    const { api: otherApi } = await newWorkspace()
    const { bot: otherBot } = expectValid('createBot', await otherApi.createBot({ name: unique('other') }))
    const other = new Client({ apiUrl, token: adminToken(), botId: otherBot.id })
    await expectApiError(other.getTable({ table: name }), 404, 'ResourceNotFound')
    assert.deepEqual(expectValid('listTables', await other.listTables({})).tables, [])
  })
})
