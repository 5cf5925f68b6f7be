// e2e.mjs: the web console end to end in headless Chromium (run by
// e2e.sh, which builds the platform and sets PLATFORM_BIN, WORK, SHOTS,
// CHROME). It starts a fresh local platform and a plain-JS SDK bot, then,
// in the browser: a wrong token, sign-in, a workspace and a bot created,
// the bot's url set, a chat through the emulator with the bot's reply
// (and an LLM call of the turn, from a fake OpenAI-compatible provider),
// the message browsed, a table row added and edited, a file uploaded and
// downloaded, a log line, the other pages, a viewer's refused controls (and the API's 403), the phone
// layout, and the platform down. Screenshots of each page go to SHOTS;
// first paint and time to content of each page are printed.
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { browserRun, openBrowser, children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const servers = []
const run = browserRun('console-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log', 'bot.log'] })
const step = run.step

async function main() {
  // 1. A fresh platform and the SDK bot.
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  // A fake OpenAI-compatible LLM provider on loopback (the cognitive API's
  // upstream): one model, a fixed answer with fixed token counts.
  const llm = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      if (req.method === 'GET' && req.url === '/v1/models') return res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-llm', object: 'model' }] }))
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        return res.end(JSON.stringify({ id: 'chatcmpl-e2e', object: 'chat.completion', model: 'fake-llm',
          choices: [{ index: 0, message: { role: 'assistant', content: 'a thought' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 17, completion_tokens: 5, total_tokens: 22 } }))
      }
      res.statusCode = 404
      res.end('{}')
    })
  })
  await new Promise((resolve) => llm.listen(0, '127.0.0.1', resolve))
  servers.push(llm)
  const llmUrl = `http://127.0.0.1:${llm.address().port}/v1`
  const platform = start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, '--llm-url', llmUrl], {}, path.join(WORK, 'platform.log'))
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform')
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token')
  const adminToken = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const botPort = await freePort()
  const botUrl = `http://127.0.0.1:${botPort}`
  start(process.execPath, [path.join(ROOT, 'scripts/conformance/fixtures/bot.js')], { PORT: String(botPort), BP_API_URL: api, BP_TOKEN: adminToken }, path.join(WORK, 'bot.log'))
  await waitHttp(botUrl + '/health', (r) => r.status === 200, 'the SDK bot')
  console.log(`platform ${api}, SDK bot ${botUrl}, screenshots in ${SHOTS}`)

  // 2. The browser.
  const downloads = path.join(WORK, 'downloads')
  fs.mkdirSync(downloads, { recursive: true })
  // BROWSER=firefox (with FIREFOX=/path, default firefox-esr): the same run
  // in Firefox over WebDriver BiDi (e2e.sh runs both browsers).
  // A failed fetch logs a network error: expected in the error steps.
  const { browser, page, problems } = await openBrowser(puppeteer, run, {
    firefox: FIREFOX, chrome: CHROME, height: 860, allowed: [api], // nothing may leave the machine
    ignore: /Failed to load resource|net::ERR_CONNECTION_REFUSED/,
    extraPrefsFirefox: { 'browser.download.dir': downloads, 'browser.download.folderList': 2, 'browser.download.useDownloadDir': true, 'browser.helperApps.neverAsk.saveToDisk': 'text/plain' },
  })
  // Firefox ESR's BiDi lacks part of viewport emulation: its window is
  // sized at launch, and the phone step is Chromium's.
  const viewport = (v) => (FIREFOX ? Promise.resolve() : page.setViewport(v))
  if (!FIREFOX) {
    const cdp = await page.createCDPSession()
    await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: downloads })
  }

  const shot = async (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  const text = (sel) => page.$eval(sel, (e) => e.innerText)
  // Polled from here (page.waitForFunction builds a function in the page,
  // which the console's CSP refuses under Firefox's BiDi).
  const waitText = async (sel, re, ms = 10000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const texts = await page.$$eval(sel, (els) => els.map((e) => e.innerText)).catch(() => [])
      if (texts.some((t) => re.test(t))) return
      if (Date.now() > deadline) throw new Error(`no ${sel} matching ${re} within ${ms} ms (found: ${JSON.stringify(texts).slice(0, 300)})`)
      await sleep(50)
    }
  }
  const waitGone = async (sel, text, ms = 10000) => {
    const deadline = Date.now() + ms
    while ((await page.$eval(sel, (e) => e.innerText).catch(() => '')).includes(text)) {
      if (Date.now() > deadline) throw new Error(`${sel} still shows ${text} after ${ms} ms`)
      await sleep(50)
    }
  }
  const clickText = async (sel, re) => {
    await waitText(sel, re)
    const els = await page.$$(sel)
    for (const e of els) if (re.test(await e.evaluate((x) => x.innerText))) return e.click()
  }
  const type = async (sel, value) => {
    await page.waitForSelector(sel)
    await page.$eval(sel, (e) => (e.value = ''))
    await page.type(sel, value)
  }
  const route = (r) => page.evaluate((h) => (location.hash = h), '#' + r)

  // Timing of a full load of a route: first contentful paint, and the time
  // until the page's heading (its data loaded) is there.
  const timings = []
  const load = async (r) => {
    // From another document: a hash-only change would not load the page.
    await page.goto('about:blank')
    await page.goto(`${api}/#${r}`, { waitUntil: 'load' })
  }
  const measure = async (name, r, readySel = 'main.page h1') => {
    await load(r)
    await page.waitForSelector(readySel)
    await waitGone('main.page', 'Loading…')
    const t = await page.evaluate(() => ({
      fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1,
      ready: performance.now(),
      bytes: performance.getEntriesByType('resource').reduce((n, e) => n + (e.transferSize || 0), 0) + (performance.getEntriesByType('navigation')[0]?.transferSize || 0),
    }))
    timings.push({ name, ...t })
  }

  let ws, bot, convId
  await step('a wrong token is refused with a clear message', async () => {
    await page.goto(api + '/', { waitUntil: 'load' })
    await type('#token', 'bp_pat_wrong')
    await page.click('form[data-test=signin] button')
    await waitText('[data-test=error]', /401/)
    const msg = await text('[data-test=error]')
    if (!/sign in again/i.test(msg)) throw new Error(`message: ${msg}`)
    await shot('01-signin-wrong-token')
  })
  await step('sign in with the personal access token', async () => {
    await type('#token', adminToken)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    await waitText('[data-test=empty]', /create one above/)
    await shot('02-workspaces-empty')
  })
  await step('create a workspace', async () => {
    await type('form[data-test=create-workspace] input', 'E2E workspace')
    await page.click('form[data-test=create-workspace] button')
    await waitText('main.page h1', /E2E workspace/)
    ws = page.url().match(/#\/w\/([^/]+)/)[1]
    await waitText('[data-test=empty]', /No bot/)
    await shot('03-workspace-bots-empty')
  })
  await step('create a bot and point it at the SDK bot', async () => {
    await type('form[data-test=create-bot] input', 'echo-bot')
    await page.click('form[data-test=create-bot] button')
    await waitText('main.page h1', /echo-bot/)
    bot = page.url().match(/\/b\/([^/]+)/)[1]
    await type('form[data-test=bot-url] input', botUrl)
    await page.click('form[data-test=bot-url] button')
    await waitText('[data-test=bot-url-saved]', /Events now go to/)
    await shot('04-bot')
  })
  await step('save a version of the bot and deploy it back', async () => {
    await type('form[data-test=save-version] input', 'v1')
    await page.click('form[data-test=save-version] button')
    await waitText('[data-test=version-done]', /Saved version v1/)
    await waitText('[data-test=versions]', /v1/)
    page.once('dialog', (d) => d.accept())
    await clickText('[data-test=versions] button', /^Deploy$/)
    await waitText('[data-test=version-done]', /Deployed version v1/)
    await shot('04b-bot-versions')
  })
  await step('chat with the SDK bot in the emulator and see its reply', async () => {
    await clickText('nav.sub a', /^Emulator$/)
    await type('form[data-test=composer] input', 'hello from the browser')
    await page.click('form[data-test=composer] button')
    await waitText('[data-test=bot-message]', /echo: hello from the browser/, 20000)
    await waitText('[data-test=user-message]', /processed/, 20000)
    await waitText('[data-test=events]', /message_created/)
    convId = await page.$eval('a[href*="/conversations/conv_"]', (a) => a.getAttribute('href').split('/').pop())
    // The bot's LLM call of this turn (made here as the bot makes it:
    // generate-text with x-bot-id, naming the conversation in meta) shows
    // under the turn: model, tokens, latency (listBotLlmCalls).
    const r = await fetch(`${api}/v2/cognitive/generate-text`, { method: 'POST',
      headers: { Authorization: `Bearer ${adminToken}`, 'x-bot-id': bot, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'best', messages: [{ role: 'user', content: 'hello from the browser' }], meta: { conversationId: convId } }) })
    if (r.status !== 200) throw new Error(`generate-text: ${r.status} ${await r.text()}`)
    await waitText('[data-test=llm-call]', /openai:fake-llm · 17 in \/ 5 out tokens · \d+ ms/, 20000)
    await shot('05-emulator')
  })
  await step('a bot that cannot answer: the event failed, with the reason', async () => {
    await route(`/w/${ws}`)
    await type('form[data-test=create-bot] input', 'silent-bot')
    await page.click('form[data-test=create-bot] button')
    await waitText('main.page h1', /silent-bot/)
    await clickText('nav.sub a', /^Emulator$/)
    await type('form[data-test=composer] input', 'anyone there?')
    await page.click('form[data-test=composer] button')
    await waitText('[data-test=failed-events]', /no url/, 20000)
    await waitText('[data-test=user-message]', /failed/)
    await shot('05b-emulator-failed-event')
  })
  await step('a bot answering 500: a bot issue with its events', async () => {
    // A "bot" that answers every delivery with HTTP 500.
    const failing = http.createServer((req, res) => { req.resume(); res.writeHead(500, { 'content-type': 'text/plain' }); res.end('boom') })
    await new Promise((r) => failing.listen(0, '127.0.0.1', r))
    servers.push(failing)
    await route(`/w/${ws}`)
    await type('form[data-test=create-bot] input', 'failing-bot')
    await page.click('form[data-test=create-bot] button')
    await waitText('main.page h1', /failing-bot/)
    await type('form[data-test=bot-url] input', `http://127.0.0.1:${failing.address().port}`)
    await page.click('form[data-test=bot-url] button')
    await waitText('[data-test=bot-url-saved]', /Events now go to/)
    await clickText('nav.sub a', /^Emulator$/)
    await type('form[data-test=composer] input', 'will you fail?')
    await page.click('form[data-test=composer] button')
    await waitText('[data-test=events]', /message_created/)
    await clickText('nav.sub a', /^Issues$/)
    await waitText('[data-test=issues]', /500/, 20000)
    await page.click('[data-test=issues] tr.clickable')
    await waitText('[data-test=issue-events]', /500/)
    await shot('05d-bot-issue')
  })
  await step('an integration whose registration failed shows the reason', async () => {
    // Installed through the API, as `bp dev` would: a dev integration at a
    // url nobody listens on.
    const h = { Authorization: `Bearer ${adminToken}`, 'x-workspace-id': ws, 'content-type': 'application/json' }
    const deadPort = await freePort()
    let r = await fetch(`${api}/v1/admin/bots`, { method: 'POST', headers: h, body: JSON.stringify({ name: 'dev-bot', dev: true, url: botUrl }) })
    if (!r.ok) throw new Error(`createBot: ${r.status} ${await r.text()}`)
    const devBot = (await r.json()).bot.id
    r = await fetch(`${api}/v1/admin/integrations`, { method: 'POST', headers: h, body: JSON.stringify({
      name: 'e2e-chan', version: '0.1.0', dev: true, url: `http://127.0.0.1:${deadPort}`,
      configuration: { schema: { type: 'object', properties: {} } },
      channels: { channel: { messages: { text: { schema: { type: 'object', properties: { text: { type: 'string' } } } } } } },
    }) })
    if (!r.ok) throw new Error(`createIntegration: ${r.status} ${await r.text()}`)
    const { integration } = await r.json()
    r = await fetch(`${api}/v1/admin/bots/${devBot}`, { method: 'PUT', headers: h, body: JSON.stringify({ integrations: { chan: { integrationId: integration.id, enabled: true, configuration: {} } } }) })
    if (!r.ok) throw new Error(`updateBot: ${r.status} ${await r.text()}`)
    await route(`/w/${ws}/b/${devBot}`)
    await waitText('[data-test=integrations]', /registration_failed/)
    await shot('05c-bot-integration-failed')
  })
  await step('browse the conversation and its message', async () => {
    await route(`/w/${ws}/b/${bot}/conversations`)
    await waitText('[data-test=conversations]', /emulator/)
    await shot('06-conversations')
    await page.click(`a[href$="${convId}"]`)
    await waitText('[data-test=message-list]', /hello from the browser/)
    await waitText('[data-test=message-list]', /echo: hello from the browser/)
    await shot('07-conversation-messages')
  })
  await step('create a table, add a row and edit it in the grid', async () => {
    await route(`/w/${ws}/b/${bot}/tables`)
    await waitText('[data-test=empty]', /No table/)
    await type('form[data-test=create-table] input', 'ticketsTable')
    await page.click('form[data-test=create-table] button')
    await clickText('table.list a', /ticketsTable/)
    await waitText('main.page h1', /ticketsTable/)
    await type('input[name=new-title]', 'first ticket')
    await page.click('[data-test=add-row]')
    await waitText('[data-test=row]', /first ticket/)
    await page.click('[data-test=edit-row]')
    await type('[data-test=editing-row] input[name=title]', 'edited ticket')
    await page.click('[data-test=save-row]')
    await waitText('[data-test=row]', /edited ticket/)
    await shot('08-table-grid')
    const r = await fetch(`${api}/v1/tables/ticketsTable/rows/find`, { method: 'POST', headers: { Authorization: `Bearer ${adminToken}`, 'x-bot-id': bot, 'content-type': 'application/json' }, body: '{}' })
    const rows = (await r.json()).rows
    if (rows.length !== 1 || rows[0].title !== 'edited ticket') throw new Error(`rows in the API: ${JSON.stringify(rows)}`)
  })
  await step('import rows from a CSV file, with the job progress', async () => {
    const csv = path.join(WORK, 'tickets.csv')
    fs.writeFileSync(csv, 'title\nimported one\nimported two\n')
    const input = await page.$('form[data-test=import] input[type=file]')
    await input.uploadFile(csv)
    await page.click('form[data-test=import] button')
    await waitText('[data-test=job]', /Import of tickets\.csv: completed/, 20000)
    await waitText('[data-test=grid]', /imported two/)
    await shot('08b-table-import')
  })
  await step('upload a file with progress and download it', async () => {
    await route(`/w/${ws}/b/${bot}/files`)
    await waitText('[data-test=files]', /tickets\.csv/) // the import's file
    const content = 'hello file ' + 'x'.repeat(200000) + '\n'
    const local = path.join(WORK, 'notes.txt')
    fs.writeFileSync(local, content)
    const input = await page.$('form[data-test=upload] input[type=file]')
    await input.uploadFile(local)
    await type('form[data-test=upload] input[placeholder^=Tags]', 'kind=notes')
    await page.click('form[data-test=upload] button')
    await waitText('[data-test=upload-status]', /upload_completed/, 20000)
    await waitText('[data-test=files]', /notes\.txt/)
    await shot('09-files')
    await page.click('[data-test=download]')
    const target = path.join(downloads, 'notes.txt')
    // Wait for the state asserted: the whole file there (a download in
    // progress may exist, shorter), at most 10 s.
    const same = () => fs.existsSync(target) && fs.readFileSync(target, 'utf8') === content
    for (let i = 0; !same() && i < 100; i++) await sleep(100)
    if (!same()) throw new Error('the downloaded file differs from the uploaded one')
  })
  await step('see a log line', async () => {
    await route(`/w/${ws}/b/${bot}/logs`)
    await waitText('[data-test=logs]', /message_created|delivered/, 20000)
    await shot('10-logs')
  })
  await step('the other pages', async () => {
    for (const [r, name, re] of [
      [`/w/${ws}/b/${bot}/users`, '11-users', /Users/],
      [`/w/${ws}/b/${bot}/states`, '12-states', /States/],
      [`/w/${ws}/b/${bot}/issues`, '13-issues', /Issues/],
      [`/w/${ws}/members`, '14-members', /Members/],
      ['/tokens', '15-tokens', /tokens/],
      ['/', '16-workspaces', /Workspaces/],
    ]) {
      await route(r)
      await waitText('main.page h1', re)
      await waitGone('main.page', 'Loading…')
      await shot(name)
    }
  })
  await step('create a token: its value is shown once', async () => {
    await route('/tokens')
    await type('form[data-test=create-token] input', 'e2e token')
    await page.click('form[data-test=create-token] button')
    await waitText('[data-test=token-value]', /bp_pat_/)
    await shot('17-token-created')
  })
  await step('a viewer sees why a control is off, and the API still refuses', async () => {
    await route(`/w/${ws}/members`)
    await type('form[data-test=invite] input', 'viewer@example.com')
    await page.select('form[data-test=invite] select', 'viewer')
    await page.click('form[data-test=invite] button')
    await waitText('table.list', /viewer@example\.com/)
    const viewerToken = fs.readFileSync(path.join(dataDir, 'account-tokens', 'viewer@example.com'), 'utf8').trim()
    await clickText('header.top button', /Sign out/)
    await type('#token', viewerToken)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    const disabled = (sel) => page.$eval(sel, (e) => e.disabled)
    // The bots page: the create form is off, and says why (createBot needs developer).
    await route(`/w/${ws}`)
    await waitText('table.list', /echo-bot/)
    await waitText('[data-test=refused]', /Your role in this workspace is viewer: creating bots needs developer or above\./)
    if (!(await disabled('form[data-test=create-bot] button'))) throw new Error('the viewer can press Create bot')
    await shot('18-viewer-refused')
    // The members page: adding, changing and removing members and inviting need administrator.
    await route(`/w/${ws}/members`)
    await waitText('[data-test=refused]', /viewer: managing members needs administrator or above/)
    await waitText('[data-test=refused]', /viewer: inviting people needs administrator or above/)
    if (!(await disabled('form[data-test=invite] button'))) throw new Error('the viewer can press Add member')
    if (await page.$('form[data-test=invite-link]')) throw new Error('the viewer is shown the invitation form')
    // A bot's tables and files: changing them needs developer.
    await route(`/w/${ws}/b/${bot}/tables`)
    await waitText('[data-test=refused]', /viewer: changing tables and rows needs developer or above/)
    if (!(await disabled('form[data-test=create-table] button'))) throw new Error('the viewer can press Create table')
    await route(`/w/${ws}/b/${bot}/files`)
    await waitText('[data-test=refused]', /viewer: uploading and deleting files needs developer or above/)
    if (!(await disabled('form[data-test=upload] button'))) throw new Error('the viewer can press Upload')
    // The workspace's settings (administrator; deleting: owner) and billing (billing).
    await route(`/w/${ws}`)
    await waitText('[data-test=refused]', /viewer: changing workspace settings needs administrator or above/)
    await waitText('[data-test=refused]', /viewer: seeing and changing billing needs billing or above/)
    for (const sel of ['form[data-test=workspace-settings] button', '[data-test=delete-workspace]', 'form[data-test=ai-spend] button']) {
      if (!(await disabled(sel))) throw new Error(`the viewer can press ${sel}`)
    }
    // The bot's API keys (developer: not even listed) and its integrations' switch.
    await route(`/w/${ws}/b/${bot}`)
    await waitText('[data-test=refused]', /viewer: managing bot API keys needs developer or above/)
    if (!(await disabled('form[data-test=create-bak] button'))) throw new Error('the viewer can press Create key')
    if (await page.$('[data-test=baks]')) throw new Error('the viewer is shown the bot API keys')
    for (const b of await page.$$('[data-test=integration-switch]')) if (!(await b.evaluate((e) => e.disabled))) throw new Error('the viewer can switch an integration')
    // The emulator (createConversation, createMessage need developer).
    await route(`/w/${ws}/b/${bot}/emulator`)
    await waitText('[data-test=refused]', /viewer: talking to the bot in the emulator needs developer or above/)
    if (!(await disabled('form[data-test=composer] button'))) throw new Error('the viewer can press Send in the emulator')
    // The console only spares the refusal: the API still answers 403 with the API's error shape.
    const r = await fetch(`${api}/v1/admin/bots`, { method: 'POST', headers: { Authorization: `Bearer ${viewerToken}`, 'x-workspace-id': ws, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'not allowed' }) })
    const body = await r.json()
    if (r.status !== 403 || typeof body.message !== 'string' || !body.type) throw new Error(`createBot as a viewer: ${r.status} ${JSON.stringify(body)}`)
    await clickText('header.top button', /Sign out/)
    await type('#token', adminToken)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    // The administrator sees the controls on again (no refusal line).
    await route(`/w/${ws}`)
    await waitText('table.list', /echo-bot/)
    if (await page.$('[data-test=refused]')) throw new Error('the administrator is shown a refusal')
    if (await disabled('form[data-test=create-bot] button')) throw new Error('Create bot is off for the administrator')
    // ... and may use the new ones: a bot API key is created and shown once.
    await route(`/w/${ws}/b/${bot}`)
    await page.waitForSelector('form[data-test=create-bak] button:not([disabled])')
    await page.click('form[data-test=create-bak] button')
    await waitText('[data-test=bak-value]', /bp_bak_/)
    if (await page.$('[data-test=refused]')) throw new Error('the administrator is shown a refusal on the bot page')
  })
  await step('phone-sized screen', async () => {
    await viewport({ width: 390, height: 844, isMobile: true, hasTouch: true })
    await load(`/w/${ws}/b/${bot}/emulator`)
    await waitText('[data-test=bot-message]', /echo:/)
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
    await shot('19-phone-emulator')
    await route(`/w/${ws}`)
    await waitText('table.list', /echo-bot/)
    await shot('20-phone-bots')
    if (overflow > 0 && !FIREFOX) throw new Error(`the emulator is ${overflow}px wider than the phone's screen`)
    await viewport({ width: 1280, height: 860 })
    await load('/')
  })
  await step('first paint of each page', async () => {
    for (const [name, r] of [
      ['workspaces', '/'],
      ['bots', `/w/${ws}`],
      ['bot', `/w/${ws}/b/${bot}`],
      ['emulator', `/w/${ws}/b/${bot}/emulator`],
      ['conversation', `/w/${ws}/b/${bot}/conversations/${convId}`],
      ['table', `/w/${ws}/b/${bot}/tables/ticketsTable`],
      ['files', `/w/${ws}/b/${bot}/files`],
      ['logs', `/w/${ws}/b/${bot}/logs`],
    ]) {
      await measure(name, r)
      await measure(name, r) // the second load: what a user sees (revalidated assets)
    }
    // A first visit: a fresh context (no cache, not signed in), the sign-in page.
    const ctx = await browser.createBrowserContext()
    const cold = await ctx.newPage()
    await cold.goto(api + '/', { waitUntil: 'load' })
    await cold.waitForSelector('#token')
    timings.push({ name: 'sign-in (cold)', ...(await cold.evaluate(() => ({
      fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1,
      ready: performance.now(),
      bytes: performance.getEntriesByType('resource').reduce((n, e) => n + (e.transferSize || 0), 0) + (performance.getEntriesByType('navigation')[0]?.transferSize || 0),
    }))) })
    await ctx.close()
    const byName = {}
    for (const t of timings) byName[t.name] = t
    console.log('page           first paint   content ready   bytes transferred')
    for (const t of Object.values(byName)) console.log(`${t.name.padEnd(14)} ${t.fcp.toFixed(0).padStart(8)} ms ${t.ready.toFixed(0).padStart(12)} ms ${String(t.bytes).padStart(12)}`)
    // The goal is 300 ms on a quiet machine; CI shares its cores with
    // other jobs, so only a gross regression (over 1.5 s) fails the run.
    const over = Object.values(byName).filter((t) => t.fcp > 300)
    if (over.length) console.log(`note: first paint over 300 ms: ${over.map((t) => t.name + ' ' + t.fcp.toFixed(0)).join(', ')}`)
    const slow = Object.values(byName).filter((t) => t.fcp < 0 || t.fcp > 1500)
    if (slow.length) throw new Error(`first paint over 1.5 s (or none): ${slow.map((t) => t.name + ' ' + t.fcp.toFixed(0)).join(', ')}`)
  })
  await step('the platform down: a clear message', async () => {
    await route(`/w/${ws}/b/${bot}`)
    await waitText('main.page h1', /echo-bot/)
    platform.kill('SIGKILL')
    await new Promise((r) => platform.once('exit', r))
    await route(`/w/${ws}/b/${bot}/users`)
    await waitText('[data-test=error]', /did not answer/)
    await shot('21-platform-down')
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main, () => { for (const s of servers) s.close() })
