// transfer-e2e.mjs: the console's export and import
// (shared/console/static/transfer.js) end to end in headless Chromium, then
// Firefox (run by scripts/transfer/e2e.sh, which builds the platform and
// sets PLATFORM_BIN, WORK, SHOTS, CHROME). Two fresh local platforms, A
// and B. On A a bot with an installed integration, a table of ROWS rows,
// files with their contents, users, conversations and messages. In the
// browser: A's bot page exports the bot (the progress bar seen between 0
// and 1, then a download link to the archive); the archive is fetched as
// the browser's download would (its link, no token) and chosen in B's
// workspace import page; the upload's bar, a dry run that lists what
// would be created and writes nothing, the import with its bar seen
// moving, no conflict; then B lists the bot's data the same as A (tables
// and row counts, rows, users, conversations, messages, files and their
// contents) and B's console lists the files. No console error, under the
// console's CSP. Prints the archive's size, the times and rows/s.
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { browserRun, openBrowser, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
// Enough rows that the export outlasts several of the page's polls (250 ms):
// with 8,000 the export showed one value between 0 and 1 at best, and none
// once the embedded store's calls ran in process (inp38: ci35 saw 0, 1).
const ROWS = Number(process.env.TRANSFER_E2E_ROWS || 40000)
const MESSAGES = 200
const FILES = 3
const run = browserRun('transfer-console-e2e', { shots: SHOTS, work: WORK, logs: ['a.log', 'b.log'] })
const step = run.step

async function platform(name) {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, name)
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], {}, path.join(WORK, `${name}.log`))
  await waitHttp(api + '/', (r) => r.status === 200, `platform ${name}`)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), `platform ${name}'s admin token`)
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const call = async (method, p, body, headers = {}) => {
    const r = await fetch(api + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const j = await r.json()
    if (r.status >= 300) throw new Error(`${name}: ${method} ${p}: ${r.status} ${JSON.stringify(j)}`)
    return j
  }
  return { name, api, token, call }
}

// The integration "chan" 1.0.0, on both platforms (an archive names its
// integration: the target has its own of the same name and version).
async function integration(p, ws, url) {
  const r = await p.call('POST', '/v1/admin/integrations', {
    name: 'chan', version: '1.0.0', url,
    configuration: { schema: { type: 'object', properties: { apiKey: { type: 'string' } } } },
    channels: { channel: { messages: { text: { schema: {} } } } },
  }, { 'x-workspace-id': ws })
  return r.integration.id
}

async function seed(a, ws, intID) {
  const W = { 'x-workspace-id': ws }
  const bot = (await a.call('POST', '/v1/admin/bots', { name: 'support', states: { profile: { type: 'user', schema: {} } }, tags: { team: 'care' } }, W)).bot.id
  await a.call('PUT', `/v1/admin/bots/${bot}`, { integrations: { chan: { integrationId: intID, enabled: true, configuration: { apiKey: 's3cret' } } } }, W)
  const B = { ...W, 'x-bot-id': bot }
  const I = { ...B, 'x-integration-alias': 'chan' }
  await a.call('POST', '/v1/tables', { name: 'itemsTable', schema: { type: 'object', properties: { name: { type: 'string' }, n: { type: 'number' } } } }, B)
  for (let done = 0; done < ROWS; done += 1000) {
    const rows = Array.from({ length: Math.min(1000, ROWS - done) }, (_, i) => ({ name: `item ${done + i}`, n: done + i }))
    await a.call('POST', '/v1/tables/itemsTable/rows', { rows }, B)
  }
  for (let i = 0; i < FILES; i++) {
    const content = `File ${i}: refunds and shipping.\n`.repeat(200 + i)
    const f = await a.call('PUT', '/v1/files', { key: `kb/doc-${i}.txt`, size: Buffer.byteLength(content), contentType: 'text/plain', tags: { n: String(i) } }, B)
    const r = await fetch(f.file.uploadUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: content })
    if (r.status >= 300) throw new Error(`upload: ${r.status}`)
  }
  const users = []; const convs = []
  for (let i = 0; i < 5; i++) {
    users.push((await a.call('POST', '/v1/chat/users', { name: `user ${i}`, tags: {} }, I)).user.id)
    convs.push((await a.call('POST', '/v1/chat/conversations', { channel: 'channel', tags: {} }, I)).conversation.id)
    await a.call('POST', `/v1/chat/conversations/${convs[i]}/participants`, { userId: users[i] }, B)
  }
  for (let done = 0; done < MESSAGES; done += 100) {
    const messages = Array.from({ length: 100 }, (_, i) => {
      const k = done + i
      return { conversationId: convs[k % 5], userId: users[k % 5], type: 'text', payload: { text: `past ${k}` }, tags: {}, discriminateByTags: [],
        createdAt: new Date(Date.UTC(2025, 0, 1, 0, 0, k)).toISOString() }
    })
    await a.call('POST', '/v1/chat/messages/import-messages', { messages }, B)
  }
  return bot
}

// listing: what a platform lists of the bot, to compare A and B.
async function listing(p, ws, bot) {
  const B = { 'x-workspace-id': ws, 'x-bot-id': bot }
  const all = async (pathq, field) => {
    const out = []; let tok = ''
    do {
      const r = await p.call('GET', pathq + (tok ? (pathq.includes('?') ? '&' : '?') + 'nextToken=' + tok : ''), undefined, B)
      out.push(...r[field]); tok = r.meta?.nextToken || ''
    } while (tok)
    return out
  }
  const tables = await all('/v1/tables', 'tables')
  const counts = {}
  for (const t of tables) counts[t.name] = (await p.call('GET', `/v1/tables/${t.name}`, undefined, B)).rows
  const rows = (await p.call('POST', '/v1/tables/itemsTable/rows/find', { limit: 1000, orderBy: 'id', orderDirection: 'desc' }, B)).rows
  const conversations = await all('/v1/chat/conversations', 'conversations')
  const messages = {}
  for (const c of conversations) messages[c.id] = (await all(`/v1/chat/messages?conversationId=${c.id}`, 'messages')).map((m) => [m.id, m.payload.text, m.createdAt])
  const files = await all('/v1/files', 'files')
  const contents = {}
  for (const f of files) {
    const g = (await p.call('GET', `/v1/files/${f.id}`, undefined, B)).file
    contents[f.key] = await (await fetch(g.url)).text()
  }
  return {
    tables: tables.map((t) => [t.id, t.name]), counts,
    rows: rows.map((r) => [r.id, r.name, r.n, r.createdAt]),
    users: (await all('/v1/chat/users', 'users')).map((u) => [u.id, u.name]),
    conversations: conversations.map((c) => c.id), messages,
    files: files.map((f) => [f.id, f.key, f.size]), contents,
  }
}

async function main() {
  const sink = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end('{}')) })
  await new Promise((r) => sink.listen(0, '127.0.0.1', r))
  const sinkURL = `http://127.0.0.1:${sink.address().port}`
  const a = await platform('a')
  const b = await platform('b')
  const wsA = (await a.call('POST', '/v1/admin/workspaces', { name: 'Acme' })).id
  const wsB = (await b.call('POST', '/v1/admin/workspaces', { name: 'Target' })).id
  await integration(b, wsB, sinkURL)
  let t0 = Date.now()
  const bot = await seed(a, wsA, await integration(a, wsA, sinkURL))
  console.log(`     seeded A: ${ROWS} rows, ${MESSAGES} messages, ${FILES} files in ${Date.now() - t0} ms`)

  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, allowed: [a.api, b.api] })
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // Polled from here (page.waitForFunction builds a function in the page,
  // which the CSP refuses under Firefox's BiDi).
  const waitFor = async (fn, what, ms = 120000, every = 100) => {
    const deadline = Date.now() + ms
    for (;;) {
      const v = await fn().catch(() => null)
      if (v) return v
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
      await sleep(every)
    }
  }
  const attr = (sel, name) => page.$eval(sel, (e, n) => e.getAttribute(n), name)
  const text = (sel) => page.$eval(sel, (e) => e.innerText)
  // follow samples a bar's data-value until done(); answers the values seen.
  // ours(), when given, says whether the bar shown is the run followed: the
  // import's bar shows the finished dry run (at 1) until the click's answer
  // swaps in the import's job.
  const follow = async (sel, done, what, ours = async () => true) => {
    const seen = []
    await waitFor(async () => {
      const v = (await ours().catch(() => false)) ? await attr(sel, 'data-value').catch(() => null) : null
      if (v !== null && seen[seen.length - 1] !== Number(v)) seen.push(Number(v))
      return done()
    }, what, 300000, 20)
    const between = seen.filter((v) => v > 0 && v < 1)
    if (between.length === 0) throw new Error(`${what}: the bar did not move (values seen: ${seen.join(', ')})`)
    for (let i = 1; i < seen.length; i++) if (seen[i] < seen[i - 1]) throw new Error(`${what}: the bar went back (${seen.join(', ')})`)
    return seen
  }
  const signIn = async (p) => {
    await page.goto(p.api + '/', { waitUntil: 'load' })
    await page.waitForSelector('#token')
    await page.type('#token', p.token)
    await page.click('form[data-test=signin] button')
    await page.waitForSelector('header.top')
  }
  const archive = path.join(WORK, 'bot.bfa')
  let exportMs, importMs, size
  await step("A's bot page: Export, the bar moving, then the archive's download link", async () => {
    await signIn(a)
    await page.goto(`${a.api}/#/w/${wsA}/b/${bot}`, { waitUntil: 'load' })
    await page.click(`nav.sub a[href="#/w/${wsA}/b/${bot}/transfer"]`)
    await waitFor(() => page.$('[data-test=export-start]'), 'the export button')
    t0 = Date.now()
    await page.click('[data-test=export-start]')
    const seen = await follow('[data-test=export-progress]', () => page.$('[data-test=download]'), 'the export')
    exportMs = Date.now() - t0
    console.log(`     export bar: ${seen.length} values, ${seen.slice(0, 8).map((v) => v.toFixed(2)).join(' ')}…`)
    await shot('01-exported')
    const href = await attr('[data-test=download]', 'href')
    size = Number(await attr('[data-test=download]', 'data-size'))
    if (await attr('[data-test=download]', 'download') === null) throw new Error('the link is not a download')
    // What the browser's download does: a GET of the link, no token.
    const res = await fetch(new URL(href, a.api))
    if (res.status !== 200 || !/attachment/.test(res.headers.get('content-disposition'))) throw new Error(`download: ${res.status} ${res.headers.get('content-disposition')}`)
    fs.writeFileSync(archive, Buffer.from(await res.arrayBuffer()))
    if (fs.statSync(archive).size !== size) throw new Error(`downloaded ${fs.statSync(archive).size} bytes, the page says ${size}`)
  })
  await step("B's workspace import page: the archive uploaded, a dry run that writes nothing", async () => {
    await signIn(b)
    await page.goto(`${b.api}/#/w/${wsB}`, { waitUntil: 'load' })
    await page.click(`header.top a[href="#/w/${wsB}/transfer"]`)
    const input = await waitFor(() => page.$('[data-test=import-file]'), 'the file input')
    await input.uploadFile(archive)
    await page.click('[data-test=import-upload]')
    await waitFor(() => page.$('[data-test=archive]'), 'the uploaded archive')
    if (Number(await attr('[data-test=upload-progress]', 'data-value')) !== 1) throw new Error('the upload bar is not full')
    const about = await text('[data-test=archive]')
    if (!about.includes(wsA) || !about.includes(bot)) throw new Error(`archive: ${about}`)
    if (await attr('[data-test=import-start]', 'disabled') === null) throw new Error('Import is enabled before a dry run')
    await page.click('[data-test=dry-run]')
    await waitFor(() => page.$('[data-test=dry-run-report]'), 'the dry run report')
    const created = Number(await attr('[data-test=dry-run-report] [data-test=count-created]', 'data-count'))
    const conflicts = Number(await attr('[data-test=dry-run-report] [data-test=count-conflicts]', 'data-count'))
    if (!(created > ROWS) || conflicts !== 0) throw new Error(`dry run: ${created} created, ${conflicts} conflicts`)
    const bots = (await b.call('GET', '/v1/admin/bots', undefined, { 'x-workspace-id': wsB })).bots
    if (bots.length !== 0) throw new Error(`the dry run wrote: ${bots.length} bots`)
    await shot('02-dry-run')
  })
  await step('Import: the bar moving, no conflict, nothing failed', async () => {
    t0 = Date.now()
    await page.click('[data-test=import-start]')
    const seen = await follow('[data-test=import-progress]', () => page.$('[data-test=import-report]'), 'the import',
      async () => (await attr('[data-test=import-progress]', 'data-dry')) === 'false')
    importMs = Date.now() - t0
    console.log(`     import bar: ${seen.length} values, ${seen.slice(0, 8).map((v) => v.toFixed(2)).join(' ')}…`)
    const n = async (k) => Number(await attr(`[data-test=import-report] [data-test=count-${k}]`, 'data-count'))
    if (!((await n('created')) > ROWS) || (await n('conflicts')) !== 0 || (await n('failed')) !== 0) {
      throw new Error(`import: ${await text('[data-test=import-report]')}`)
    }
    await shot('03-imported')
  })
  await step("B lists the bot's data as A does", async () => {
    const [la, lb] = [await listing(a, wsA, bot), await listing(b, wsB, bot)]
    for (const k of Object.keys(la)) {
      if (JSON.stringify(la[k]) !== JSON.stringify(lb[k])) throw new Error(`${k} differs:\nA ${JSON.stringify(la[k]).slice(0, 500)}\nB ${JSON.stringify(lb[k]).slice(0, 500)}`)
    }
    if (la.counts.itemsTable !== ROWS || Object.values(la.messages).flat().length !== MESSAGES || la.files.length !== FILES) throw new Error(`A lists ${JSON.stringify(la.counts)}`)
    await page.goto(`${b.api}/#/w/${wsB}/b/${bot}/files`, { waitUntil: 'load' })
    await waitFor(async () => (await page.evaluate(() => document.body.innerText)).includes('kb/doc-2.txt'), "B's Files page listing the files")
    await shot('04-files-on-b')
  })
  console.log(`     numbers: archive ${size} bytes; export ${exportMs} ms (${Math.round(ROWS / (exportMs / 1000))} rows/s), import ${importMs} ms (${Math.round(ROWS / (importMs / 1000))} rows/s), click to done in the UI`)
  await browser.close()
  sink.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main)
