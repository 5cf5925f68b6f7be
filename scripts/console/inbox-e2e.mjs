// inbox-e2e.mjs: the console's inbox end to end (run by inbox-e2e.sh,
// which builds the platform and sets PLATFORM_BIN, WORK, SHOTS, CHROME,
// BROWSER). A fresh local platform, the SDK bot of the hitl tests
// (scripts/conformance/fixtures/hitl-bot.js) with the built-in chat and
// hitl integrations, an end user on the Chat API (fetch), and in the
// browser: the inbox open when the user asks for a human, the waiting
// session appearing without a reload, the transcript, assign, a text
// reply and an image reply (uploaded through the Files API) reaching the
// end user, close, the bot answering again; no console error.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { browserRun, openBrowser, children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
// AWS_LOCAL=1: against the AWS build (./functions/aws-local, make
// inbox-e2e-aws): the console from the admin function behind the API
// Gateway stand-in, the inbox stream from the streaming function's URL
// (another origin), the signals through chatrelay and the fan-out.
const AWS_LOCAL = process.env.AWS_LOCAL === '1'
const run = browserRun('inbox-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log', 'bot.log'] })
const step = run.step

async function until(what, f, ms = 15000) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(50)
  }
}

// A 1x1 PNG.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64')

async function main() {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], {}, path.join(WORK, 'platform.log'))
  const ready = AWS_LOCAL ? 600000 : 30000 // aws-local builds its functions first
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform', ready)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token', ready)
  // Where the inbox stream is served: this origin, or on aws-local the
  // streaming function URL's stand-in (the stack's ChatStreamUrl).
  const streamOrigin = AWS_LOCAL ? new URL(JSON.parse(fs.readFileSync(path.join(dataDir, 'aws-local', 'outputs.json'), 'utf8')).ChatStreamUrl).origin : api
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const botPort = await freePort()
  const botUrl = `http://127.0.0.1:${botPort}`
  start(process.execPath, [path.join(ROOT, 'scripts/conformance/fixtures/hitl-bot.js')], { PORT: String(botPort), BP_API_URL: api, BP_TOKEN: token }, path.join(WORK, 'bot.log'))
  await waitHttp(botUrl + '/health', (r) => r.status === 200, 'the SDK bot')

  // The platform's API as the admin (set-up), and the end user's Chat API.
  const admin = async (method, p, body, headers = {}) => {
    const res = await fetch(api + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const out = await res.json()
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(out)}`)
    return out
  }
  const { id: ws } = await admin('POST', '/v1/admin/workspaces', { name: 'Support' })
  const wsh = { 'x-workspace-id': ws }
  const chatInt = (await admin('GET', '/v1/admin/hub/integrations/chat/latest')).integration
  const hitlInt = (await admin('GET', '/v1/admin/hub/integrations/hitl/latest')).integration
  const { bot } = await admin('POST', '/v1/admin/bots', { name: 'support-bot', dev: true, url: botUrl }, wsh)
  const tag = {}
  const updated = (await admin('PUT', `/v1/admin/bots/${bot.id}`, {
    integrations: { [chatInt.id]: { enabled: true, configuration: {} }, [hitlInt.id]: { enabled: true, configuration: {} } },
    states: { 'hitl#hitl': { type: 'conversation', schema: { type: 'object', properties: { hitlActive: { type: 'boolean' } } } } },
    events: { 'hitl#humanAgentAssignedTimeout': { schema: { type: 'object' } } },
    conversation: { tags: { 'hitl#downstream': tag, 'hitl#upstream': tag, 'hitl#humanAgentId': tag } },
    user: { tags: { 'hitl#downstream': tag, 'hitl#upstream': tag } },
  }, wsh)).bot
  const chatUrl = (await admin('GET', `/v1/admin/bots/${bot.id}`, undefined, wsh)).bot.integrations[chatInt.id].webhookUrl
  const user = await (await fetch(chatUrl + '/users', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json()
  const uh = { 'content-type': 'application/json', 'x-user-key': user.key }
  const { conversation } = await (await fetch(chatUrl + '/conversations', { method: 'POST', headers: uh, body: '{}' })).json()
  const say = (text) => fetch(chatUrl + '/messages', { method: 'POST', headers: uh, body: JSON.stringify({ conversationId: conversation.id, payload: { type: 'text', text } }) })
  const userSees = (what, pred) => until(`the end user sees ${what}`, async () => {
    const { messages } = await (await fetch(`${chatUrl}/conversations/${conversation.id}/messages`, { headers: uh })).json()
    return messages.find((m) => m.userId !== user.user.id && pred(m.payload))
  })
  console.log(`platform ${api}, SDK bot ${botUrl} (bot ${updated.id}), screenshots in ${SHOTS}`)

  // The browser.
  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, height: 860 })
  page.on('dialog', (d) => d.accept())
  page.on('request', (r) => {
    if (!r.url().startsWith(api) && !r.url().startsWith(streamOrigin + '/') && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) problems.push(`external request: ${r.url()}`)
  })
  if (!FIREFOX) {
    // Chromium: the operator allowed notifications; record the ones the
    // console shows (the real Notification, wrapped).
    await browser.defaultBrowserContext().overridePermissions(api, ['notifications'])
    await page.evaluateOnNewDocument(() => {
      const Real = window.Notification
      window.__notified = []
      if (Real) window.Notification = class extends Real { constructor(title, opts) { super(title, opts); window.__notified.push(`${title}: ${opts?.body}`) } }
    })
  }
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // Polled from here (page.waitForFunction builds a function in the page,
  // which the console's CSP refuses under Firefox's BiDi).
  const waitText = async (sel, re, ms = 15000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const texts = await page.$$eval(sel, (els) => els.map((e) => e.innerText)).catch(() => [])
      if (texts.some((t) => re.test(t))) return
      if (Date.now() > deadline) throw new Error(`no ${sel} matching ${re} within ${ms} ms (found: ${JSON.stringify(texts).slice(0, 300)})`)
      await sleep(50)
    }
  }
  const type = async (sel, value) => {
    await page.waitForSelector(sel)
    await page.$eval(sel, (e) => (e.value = ''))
    await page.type(sel, value)
  }

  await step('sign in and open the inbox: nothing waits', async () => {
    await page.goto(api + '/', { waitUntil: 'load' })
    // The fallback poll made very long: what appears below came through
    // the inbox stream (docs/hitl.md "Live updates").
    await page.evaluate(() => localStorage.setItem('inbox.pollMs', String(3600 * 1000)))
    await type('#token', token)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    await page.evaluate((h) => (location.hash = h), `#/w/${ws}/inbox`)
    await waitText('main.page h1', /Inbox/)
    await waitText('[data-test=sessions]', /No session here/)
    await waitText('[data-test=inbox-link]', /Inbox/)
    await page.waitForSelector('[data-test=inbox-live]')
    if (AWS_LOCAL) {
      // The stream is the streaming function's (the ticket's url, which the
      // console opens), not the API Gateway's.
      const t = await admin('POST', `/v1/admin/workspaces/${ws}/hitl/stream-ticket`)
      if (!t.url.startsWith(streamOrigin + '/') || streamOrigin === api) throw new Error(`ticket url ${t.url}, want it at ${streamOrigin}`)
      console.log(`  the inbox stream at ${streamOrigin} (ChatStreamUrl), the console at ${api}`)
    }
  })
  let sessionUrl
  await step('a waiting session appears live (no reload), with the unread count', async () => {
    await say('hello')
    await userSees('the bot', (p) => p.text === 'bot: hello')
    await say('human please')
    await waitText('[data-test=session]', /Help wanted/)
    if (!FIREFOX) {
      const n = await until('a browser notification', () => page.evaluate(() => window.__notified.length && window.__notified))
      if (!/Help wanted/.test(n.join())) throw new Error(`notifications: ${n}`)
    }
    await say('are you there?')
    // On aws-local a delivery the loaded bot answered late is delivered
    // again (at least once), and the test bot relays the repeat too.
    const unreadRe = AWS_LOCAL ? /^[1-9]\d*$/ : /1/
    await waitText('[data-test=unread]', unreadRe)
    await waitText('[data-test=inbox-unread]', unreadRe)
    await shot('01-waiting')
  })
  await step('the transcript: before the handover, and the user\'s message', async () => {
    await page.click('[data-test=session]')
    await waitText('[data-test=transcript]', /are you there\?/)
    await waitText('[data-test=transcript]', /before the handover/)
    sessionUrl = page.url()
    if (!/#\/w\/[^/]+\/inbox\/conv_/.test(sessionUrl)) throw new Error(`url: ${sessionUrl}`)
    await shot('02-session')
  })
  await step('assign to me: the user is told', async () => {
    await page.click('[data-test=assign-me]')
    await waitText('[data-test=session-status]', /assigned/)
    await waitText('[data-test=assignee]', /@/)
    await userSees('that an agent joined', (p) => p.text === 'A human agent has joined the conversation.')
    await page.click('[data-test=tab-mine]')
    await waitText('[data-test=sessions]', /Help wanted/)
  })
  await step('reply with text: the user gets it; the user\'s answer shows', async () => {
    await type('[data-test=reply] input:not([type=file])', 'Hello from a person')
    await page.click('[data-test=reply] button[type=submit]')
    await userSees('the reply', (p) => p.text === 'Hello from a person')
    const sent = Date.now()
    await say('thanks!')
    await waitText('[data-test=transcript]', /thanks!/)
    console.log(`  the user's message shown in the inbox ${Date.now() - sent} ms after it was sent (stream, no poll)`)
  })
  if (AWS_LOCAL) console.log('  (aws-local: no image reply: the console uploads to the S3 stand-in at http://127.0.0.1, which its CSP does not name)')
  else await step('reply with an image: uploaded, the user gets its url, the inbox shows it', async () => {
    const file = path.join(WORK, 'cat.png')
    fs.writeFileSync(file, PNG)
    const input = await page.$('[data-test=attach]')
    await input.uploadFile(file)
    const img = await userSees('the image', (p) => p.type === 'image' && p.imageUrl)
    const res = await fetch(img.payload?.imageUrl ?? img.imageUrl)
    if (res.status !== 200) throw new Error(`the image's url: ${res.status}`)
    await until('the image in the transcript', () => page.$('[data-test=transcript] img.shot'))
    await shot('03-replies')
  })
  await step('a note, then close: the bot answers again', async () => {
    await type('[data-test=note] input', 'Asked about a refund')
    await page.click('[data-test=note] button')
    await waitText('[data-test=notes]', /Asked about a refund/)
    await page.click('[data-test=close]')
    await waitText('[data-test=session-status]', /closed/)
    await waitText('[data-test=closed-notice]', /closed/)
    await userSees('the close', (p) => p.text === 'The agent closed the session. I am back.')
    await say('back?')
    await userSees('the bot again', (p) => p.text === 'bot: back?')
    await page.click('[data-test=tab-closed]')
    await waitText('[data-test=sessions]', /Help wanted/)
    await shot('04-closed')
  })
  // (aws-local writes no account-tokens/ for a new member: the viewer's
  // check runs on the local build only; the console's code is the same.)
  if (!AWS_LOCAL) await step('a viewer (below the agent role) reads, and sees why answering is off', async () => {
    await admin('POST', '/v1/admin/workspace-members', { email: 'viewer@example.com', role: 'viewer' }, wsh)
    const viewerToken = fs.readFileSync(path.join(dataDir, 'account-tokens', 'viewer@example.com'), 'utf8').trim()
    await say('human please') // a new waiting session
    await page.evaluate(() => [...document.querySelectorAll('header.top button')].find((b) => /Sign out/.test(b.textContent)).click())
    await type('#token', viewerToken)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    await page.evaluate((h) => (location.hash = h), `#/w/${ws}/inbox`)
    await page.click('[data-test=tab-waiting]')
    await waitText('[data-test=session]', /Help wanted/)
    await page.click('[data-test=session]')
    await waitText('[data-test=transcript]', /human please/)
    await waitText('[data-test=refused]', /Your role in this workspace is viewer: answering in the inbox \(reply, assign, notes, close\) needs developer or above\./)
    for (const sel of ['[data-test=assign-me]', '[data-test=close]', '[data-test=reply] input:not([type=file])', '[data-test=attach]', '[data-test=note] input']) {
      if (!(await page.$eval(sel, (e) => e.disabled))) throw new Error(`the viewer can use ${sel}`)
    }
    await shot('05-viewer')
    // The API still refuses it (403, the API's error shape).
    const { sessions } = await (await fetch(`${api}/v1/admin/workspaces/${ws}/hitl/sessions?status=waiting`, { headers: { authorization: `Bearer ${viewerToken}` } })).json()
    const s = sessions[0]
    const r = await fetch(`${api}/v1/admin/workspaces/${ws}/hitl/sessions/${s.botId}/${s.id}/messages`, { method: 'POST', headers: { authorization: `Bearer ${viewerToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ type: 'text', payload: { text: 'no' } }) })
    const body = await r.json()
    if (r.status !== 403 || !body.type) throw new Error(`a viewer's reply: ${r.status} ${JSON.stringify(body)}`)
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main)
