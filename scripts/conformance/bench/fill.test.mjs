// Fill time through the official client (issue 36's "fill time for 100,000
// rows and 20,000 messages"): FILL_ROWS rows (default 100,000) of three
// indexed columns (n: a unique number, s: a unique string, city: one of 100
// strings) by 4 writers of createTableRows of 1,000 rows, then FILL_MESSAGES
// messages (default 20,000) into 100 conversations of one bot by 8 writers.
// Run: make fill-bench. It prints times; it asserts only that every write
// was answered and the counts came out exact.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Client, adminToken, apiUrl, newWorkspace, unique } from '../lib/env.mjs'

const rowsTotal = Number(process.env.FILL_ROWS ?? 100000)
const messagesTotal = Number(process.env.FILL_MESSAGES ?? 20000)

async function writers(n, work) {
  await Promise.all(Array.from({ length: n }, work))
}

test(`fill ${rowsTotal} rows and ${messagesTotal} messages`, async () => {
  const { api } = await newWorkspace()
  const { bot } = await api.createBot({ name: unique('fill') })
  const client = new Client({ apiUrl, token: adminToken(), botId: bot.id })

  const table = `fill${unique('').replace(/-/g, '')}Table`
  const properties = { n: { type: 'number' }, s: { type: 'string' }, city: { type: 'string' } }
  await client.createTable({ name: table, schema: { type: 'object', properties } })
  let next = 0
  let t0 = performance.now()
  await writers(4, async () => {
    for (let b = (next += 1000) - 1000; b < rowsTotal; b = (next += 1000) - 1000) {
      const rows = []
      for (let i = b; i < Math.min(b + 1000, rowsTotal); i++) rows.push({ n: i, s: `s${i}`, city: `city${i % 100}` })
      await client.createTableRows({ table, rows })
    }
  })
  const rowsSeconds = (performance.now() - t0) / 1000
  assert.equal((await client.getTable({ table })).rows, rowsTotal)

  const user = (await client.createUser({ tags: {} })).user
  const conversations = []
  for (let i = 0; i < 100; i++) conversations.push((await client.createConversation({ channel: 'channel', tags: {} })).conversation.id)
  let sent = 0
  t0 = performance.now()
  await writers(8, async () => {
    for (let i = sent++; i < messagesTotal; i = sent++) {
      await client.createMessage({ conversationId: conversations[i % 100], userId: user.id, type: 'text', payload: { text: `m${i}` }, tags: {} })
    }
  })
  const messagesSeconds = (performance.now() - t0) / 1000
  const { conversation } = await client.getConversation({ id: conversations[0] })
  if ('messageCount' in conversation) assert.equal(conversation.messageCount, Math.ceil(messagesTotal / 100))
  console.log(
    `FILL ${rowsTotal} rows: ${rowsSeconds.toFixed(1)} s (${(rowsTotal / rowsSeconds).toFixed(0)} rows/s); ` +
      `${messagesTotal} messages: ${messagesSeconds.toFixed(1)} s (${(messagesTotal / messagesSeconds).toFixed(0)} messages/s)`,
  )
})
