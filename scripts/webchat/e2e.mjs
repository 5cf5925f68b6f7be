// e2e.mjs: the hosted webchat page end to end in a headless browser (run
// by e2e.sh, which builds the platform and sets PLATFORM_BIN, WORK, SHOTS,
// CHROME / FIREFOX, BROWSER). A fresh local platform and a plain-JS SDK
// bot (bot.js: it echoes, and calls the webchat's actions on the test's
// commands); the bot gets
// the built-in webchat integration through the API, getBotWebchat gives
// the page's URL; then, in the browser, the official @botpress/webchat
// component: a message typed, the bot's reply shown, a file sent (its
// upload through the presigned URL), a reload keeping the history, the
// bot's webchat actions (hideWebchat, showWebchat, toggleWebchat,
// configWebchat, customEvent, getUserData: the bot's client.callAction)
// changing the page. Every request must go to the platform's origin and no
// console error may show, except the file's upload to the origin the
// page's CSP names for it (on AWS the bucket's S3 host). AWS_LOCAL=1
// (make webchat-e2e-aws, webchat-e2e-aws-container): PLATFORM_BIN is
// aws-local (slower to start), the page's origin is the stack's
// ChatStreamUrl (the stream function's URL, or with
// AWS_LOCAL_STREAM_TIER=container the load balancer's stand-in: checked
// against aws-local's log), and the upload goes to another origin (the
// function's S3 endpoint, answering CORS as the template's bucket rule
// says). AWS_LOCAL_STREAM_LB=nlb (make webchat-e2e-aws-nlb): the container
// tier behind the NLB's stand-in, the page over https with aws-local's
// test certificate, trusted for the run only (see NLB below).
import crypto from 'node:crypto'
import fs from 'node:fs'
import https from 'node:https'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
// The console's browser driver (scripts/console: puppeteer-core).
const puppeteer = createRequire(path.join(ROOT, 'scripts/console/package.json'))('puppeteer-core')
const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const AWS_LOCAL = process.env.AWS_LOCAL === '1'
// Behind the NLB's stand-in (make webchat-e2e-aws-nlb): the page is https,
// the tasks' test certificate signed by aws-local's test CA.
const NLB = AWS_LOCAL && process.env.AWS_LOCAL_STREAM_LB === 'nlb'

let failures = 0
let page = null
const problems = []
const notFound = []
const step = async (name, fn) => {
  const t0 = Date.now()
  try {
    await fn()
    console.log(`ok   ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    failures++
    console.log(`FAIL ${name}: ${e.stack || e}`)
    if (page) {
      await page.screenshot({ path: path.join(SHOTS, 'failure.png'), fullPage: true }).catch(() => {})
      console.log('the page (failure.png):\n' + (await page.$eval('body', (b) => b.innerText).catch(() => '?')).slice(0, 1500))
      console.log('problems so far:\n' + [...problems, ...notFound].join('\n'))
    }
    throw e
  }
}

async function main() {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], {}, path.join(WORK, 'platform.log'))
  // aws-local (AWS_LOCAL=1) builds its functions first.
  const ready = AWS_LOCAL ? 600000 : 30000
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform', ready)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token', ready)
  // Where the page is served: the platform, or on AWS where the streams
  // are (the stack's ChatStreamUrl: API Gateway cannot hold the stream).
  const origin = AWS_LOCAL
    ? JSON.parse(fs.readFileSync(path.join(dataDir, 'aws-local', 'outputs.json'), 'utf8')).ChatStreamUrl.replace(/\/$/, '')
    : api
  if (AWS_LOCAL) {
    // The tier asked for is the one serving ChatStreamUrl.
    const logged = fs.readFileSync(path.join(WORK, 'platform.log'), 'utf8')
    const tier = process.env.AWS_LOCAL_STREAM_TIER || 'lambda'
    const want = tier === 'container'
      ? (logged.match(/aws-local: the container stream tier.* loadBalancer=(\S+)/) || [])[1]
      : (logged.match(/aws-local: function URL.* function=ChatStreamFunction url=(\S+)/) || [])[1]
    if (!want || want.replace(/\/$/, '') !== origin) throw new Error(`stream tier ${tier}: ChatStreamUrl ${origin}, want ${want}`)
    console.log(`stream tier ${tier}: the page at ${origin}`)
  }
  // Behind the NLB the browser trusts the test certificate as a user's
  // would trust a private CA, for this run only: Chromium the server
  // certificate's public key (--ignore-certificate-errors-spki-list, its
  // SHA-256 in base64), Firefox the test CA in its profile's trust store
  // (certutil, NSS's tool); Node's requests (the file's link, /users/me)
  // the CA as their `ca`. No certificate error is ignored otherwise.
  let tlsCA = null
  const chromiumArgs = []
  let firefoxProfile
  if (NLB) {
    if (!origin.startsWith('https://')) throw new Error(`behind the NLB ChatStreamUrl is ${origin}, want https`)
    const awsDir = path.join(dataDir, 'aws-local')
    tlsCA = fs.readFileSync(path.join(awsDir, 'stream-ca.pem'), 'utf8')
    const leaf = new crypto.X509Certificate(fs.readFileSync(path.join(awsDir, 'stream-tls.pem')))
    if (leaf.ca) throw new Error('the tasks\' certificate is a CA: a browser refuses it as a server\'s')
    const spki = crypto.createHash('sha256').update(leaf.publicKey.export({ type: 'spki', format: 'der' })).digest('base64')
    chromiumArgs.push(`--ignore-certificate-errors-spki-list=${spki}`)
    if (FIREFOX) {
      firefoxProfile = path.join(WORK, 'firefox-profile')
      fs.mkdirSync(firefoxProfile, { recursive: true })
      execFileSync('certutil', ['-N', '-d', `sql:${firefoxProfile}`, '--empty-password'])
      execFileSync('certutil', ['-A', '-d', `sql:${firefoxProfile}`, '-n', 'aws-local test CA', '-t', 'C,,', '-i', path.join(awsDir, 'stream-ca.pem')])
    }
    console.log(`https: ${origin}, the test CA trusted (${FIREFOX ? 'the Firefox profile\'s trust store' : 'Chromium: the certificate\'s key ' + spki})`)
  }
  // fetchPage is fetch, with the test CA trusted for https (Node 20's
  // fetch takes no CA of its own: node:https does).
  const fetchPage = (u, init = {}) => {
    if (!tlsCA || !u.startsWith('https://')) return fetch(u, init)
    return new Promise((resolve, reject) => {
      const req = https.request(u, { method: init.method || 'GET', headers: init.headers, ca: tlsCA }, (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString('utf8')
          resolve({ ok: res.statusCode >= 200 && res.statusCode < 300, status: res.statusCode, text: async () => body })
        })
      })
      req.on('error', reject)
      req.end(init.body)
    })
  }
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const botPort = await freePort()
  const botUrl = `http://127.0.0.1:${botPort}`
  start(process.execPath, [path.join(HERE, 'bot.js')], { PORT: String(botPort), BP_API_URL: api, BP_TOKEN: token }, path.join(WORK, 'bot.log'))
  await waitHttp(botUrl + '/health', (r) => r.status === 200, 'the SDK bot')

  const call = async (method, p, body, headers = {}) => {
    const r = await fetch(api + p, { method, headers: { Authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const out = await r.json()
    if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(out)}`)
    return out
  }
  let pageUrl, bot, alias
  await step('the bot gets the webchat integration and getBotWebchat its page', async () => {
    const ws = (await call('POST', '/v1/admin/workspaces', { name: 'webchat e2e' })).id
    const h = { 'x-workspace-id': ws }
    bot = (await call('POST', '/v1/admin/bots', { name: 'Echo', dev: true, url: botUrl }, h)).bot.id
    const { integration } = await call('GET', '/v1/admin/hub/integrations/webchat/latest', undefined, h)
    await call('PUT', `/v1/admin/bots/${bot}`, { integrations: { [integration.id]: { enabled: true, configuration: {} } } }, h)
    const inst = (await call('GET', `/v1/admin/bots/${bot}`, undefined, h)).bot.integrations[integration.id]
    alias = inst.alias || inst.name
    pageUrl = (await call('GET', `/v1/admin/bots/${bot}/webchat?type=sharableUrl`, undefined, h)).code
    if (!pageUrl.startsWith(origin + '/webhooks/')) throw new Error(`sharableUrl: ${pageUrl}, want it below ${origin}/webhooks/`)
  })

  const browser = FIREFOX
    ? await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true, args: ['--width=1000', '--height=800'], userDataDir: firefoxProfile })
    : await puppeteer.launch({ executablePath: CHROME, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-gpu', ...chromiumArgs] })
  console.log(`browser: ${await browser.version()}; page ${pageUrl}`)
  page = await browser.newPage()
  // Every console line of the page (the component logs its connection's
  // states), kept with the platform's log when the run fails.
  const consoleLog = fs.createWriteStream(path.join(WORK, 'browser-console.log'))
  page.on('console', (m) => {
    consoleLog.write(`${new Date().toISOString()} ${m.type()} ${m.text()}\n`)
    if (m.type() === 'error') problems.push(`console: ${m.text()}`)
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  page.on('response', (r) => {
    if (r.status() >= 400) notFound.push(`${r.status()} ${r.url()}`)
  })
  // The origin the page's CSP allows for uploads besides its own (the
  // presigned URLs' host), read from the page's answer.
  let filesOrigin = null
  page.on('response', (r) => {
    if (r.url() === pageUrl) {
      const connect = (r.headers()['content-security-policy'] || '').split(';').map((d) => d.trim()).find((d) => d.startsWith('connect-src ')) || ''
      filesOrigin = connect.split(/\s+/).slice(1).find((src) => src !== "'self'") || null
    }
  })
  const otherOrigin = []
  page.on('request', (r) => {
    const u = r.url()
    if (u.startsWith(origin + '/') || u.startsWith('blob:') || u.startsWith('data:')) return
    // A presigned upload to the origin the CSP names (Chromium reports
    // the preflight as a request of its own, Firefox does not).
    if (filesOrigin && u.startsWith(filesOrigin + '/') && ['PUT', 'OPTIONS'].includes(r.method()) && u.includes('X-Amz-Signature=')) {
      otherOrigin.push(`${r.method()} ${u.split('?')[0]}`)
      return
    }
    problems.push(`request to another origin: ${r.method()} ${u}`)
  })
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // Polled from here (no function evaluated under the page's CSP).
  const waitText = async (re, ms = 20000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const t = await page.$eval('body', (b) => b.innerText).catch(() => '')
      if (re.test(t)) return
      if (Date.now() > deadline) throw new Error(`no text matching ${re} within ${ms} ms (page: ${t.slice(0, 400)})`)
      await sleep(100)
    }
  }
  // The component renders its composer at once, disabled (the textarea's
  // disabled attribute) until its /initialize stream has answered init:
  // keys typed before are dropped (a Firefox run on the Lambda tier, whose
  // stream function started cold under load, typed into it and waited
  // for a reply to a message never sent). So: wait for the enabled
  // composer, type, check the text is there, then send.
  const composer = '.bpComposerInput:not([disabled])'
  const say = async (text) => {
    await page.waitForSelector(composer, { visible: true, timeout: 20000 })
    await page.type(composer, text)
    const got = await page.$eval('.bpComposerInput', (e) => e.value)
    if (got !== text) throw new Error(`the composer holds ${JSON.stringify(got)} after typing ${JSON.stringify(text)}`)
    await page.keyboard.press('Enter')
  }
  const count = async (re) => ((await page.$eval('body', (b) => b.innerText).catch(() => '')).match(new RegExp(re.source, 'g')) || []).length

  await step('the hosted page shows the official component, connected', async () => {
    await page.goto(pageUrl, { waitUntil: 'load' })
    await page.waitForSelector(composer, { visible: true, timeout: 20000 })
    await shot('01-page')
  })
  await step('a message typed, the bot\'s reply shown', async () => {
    await say('hello from the page')
    await waitText(/echo: hello from the page/)
    await shot('02-reply')
  })
  await step('a file sent: uploaded to the platform, shown in the conversation', async () => {
    const file = path.join(WORK, 'notes.txt')
    fs.writeFileSync(file, 'a file from the browser\n')
    let uploaded = 0
    page.on('response', (r) => {
      if (r.request().method() === 'PUT' && r.url().includes('X-Amz-Signature=') && r.ok()) uploaded++
    })
    const input = await page.waitForSelector('input[type=file]')
    await input.uploadFile(file)
    // Uploaded (the PUT to the presigned URL answered, the composer's
    // loader gone), then sent.
    const deadline = Date.now() + 20000
    while (!uploaded || (await page.$('.bpComposerFileLoader'))) {
      if (Date.now() > deadline) throw new Error('the file was not uploaded within 20 s')
      await sleep(100)
    }
    await page.click('.bpComposerSendButton')
    await page.waitForSelector('.bpMessageBlocksFileTitle', { timeout: 20000 })
    await waitText(/\bnotes\b/)
    // Its link (in the message) serves the bytes sent.
    const href = await page.$eval('a[href*="/files/"]', (a) => a.href)
    const got = await (await fetchPage(href)).text()
    if (got !== 'a file from the browser\n') throw new Error(`the file's link ${href} answers ${JSON.stringify(got)}`)
    // The bot got it (its echo of a message without text).
    await waitText(/echo: undefined/)
    // Locally the upload is same-origin; on aws-local it is not, and the
    // page's CSP named that origin.
    if (AWS_LOCAL && !otherOrigin.some((x) => x.startsWith('PUT '))) throw new Error(`the upload did not go to the CSP's files origin ${filesOrigin}`)
    if (!AWS_LOCAL && filesOrigin) throw new Error(`the local page's CSP names another origin: ${filesOrigin}`)
    console.log(`upload: ${otherOrigin.length ? otherOrigin.join(', ') : 'same origin'}`)
    await shot('03-file')
  })
  await step('a reload keeps the history', async () => {
    await page.reload({ waitUntil: 'load' })
    await page.waitForSelector('.bpComposerInput', { timeout: 20000 })
    await waitText(/echo: hello from the page/)
    await page.waitForSelector('.bpMessageBlocksFileTitle', { timeout: 20000 })
    if ((await count(/hello from the page/)) < 2) throw new Error('the user\'s message is missing after the reload')
    await shot('04-reload')
  })
  // The bot's webchat actions: on a command typed in the page, the bot
  // calls them (bot.js); showWebchat, while the composer is hidden, is
  // called as the bot's client.callAction calls it (the same request).
  if (alias !== 'webchat') throw new Error(`the installation's alias is ${alias}: bot.js calls webchat:<action>`)
  const action = async (name, input) => {
    const { conversations } = await call('GET', '/v1/chat/conversations', undefined, { 'x-bot-id': bot })
    if (conversations.length !== 1) throw new Error(`the bot has ${conversations.length} conversations, want 1`)
    return call('POST', '/v1/chat/actions', { type: `${alias}:${name}`, input: { conversationId: conversations[0].id, ...input } }, { 'x-bot-id': bot })
  }
  const visibility = () => page.$eval('html', (e) => e.getAttribute('data-webchat-visibility')).catch(() => null)
  const waitVisibility = async (want, ms = 20000) => {
    const deadline = Date.now() + ms
    let got
    while ((got = await visibility()) !== want) {
      if (Date.now() > deadline) throw new Error(`the page's visibility is ${got} after ${ms} ms, want ${want}`)
      await sleep(100)
    }
  }
  await step('hideWebchat hides the chat, showWebchat shows it, toggleWebchat and the page\'s button', async () => {
    await waitVisibility('visible')
    await say('webchat:hideWebchat')
    await waitVisibility('hidden')
    if (await page.$eval('.bpComposerInput', (e) => e.offsetParent !== null)) throw new Error('the composer is still shown')
    await page.waitForSelector('.page-open', { visible: true, timeout: 5000 })
    await shot('05-hidden')
    await action('showWebchat')
    await waitVisibility('visible')
    await page.waitForSelector('.bpComposerInput', { visible: true, timeout: 5000 })
    await waitText(/done: hideWebchat/)
    await say('webchat:toggleWebchat')
    await waitVisibility('hidden')
    await page.click('.page-open') // the visitor opens it again
    await waitVisibility('visible')
    await page.waitForSelector('.bpComposerInput', { visible: true, timeout: 5000 })
  })
  await step('configWebchat changes the configuration (the bot\'s name in the header)', async () => {
    await say('webchat:configWebchat ' + JSON.stringify({ botName: 'Renamed by the bot' }))
    await waitText(/Renamed by the bot/)
    await shot('06-config')
  })
  await step('customEvent reaches the page as a webchat:customEvent event', async () => {
    await page.evaluate(() => {
      window.__customEvents = []
      window.addEventListener('webchat:customEvent', (e) => window.__customEvents.push(e.detail))
    })
    await say('webchat:customEvent ' + JSON.stringify({ kind: 'e2e', items: [1, 2], nested: { ok: true } }))
    // Compared with sorted keys (the platform's JSON sorts them).
    const canon = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort()) : x))
    const want = canon([{ kind: 'e2e', items: [1, 2], nested: { ok: true } }])
    const deadline = Date.now() + 20000
    let got
    while ((got = canon(await page.evaluate(() => window.__customEvents))) !== want) {
      // Which side lost it: the bot answers "done: customEvent" once the
      // action (the signal's publication) returned.
      if (Date.now() > deadline) throw new Error(`custom events on the page: ${got}, want ${want} (the bot's "done: customEvent" shown ${await count(/done: customEvent/)} times; the composer holds ${JSON.stringify(await page.$eval('.bpComposerInput', (e) => e.value).catch(() => null))})`)
      await sleep(100)
    }
  })
  await step('the user data the component sends reaches the bot (getUserData)', async () => {
    // As the component's updateUser({data}) sends it, with the visitor's
    // key from the component's storage.
    const stored = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.endsWith('-client')).map((k) => localStorage.getItem(k)))
    const key = stored.map((v) => JSON.parse(v)?.state?.user?.userToken).find(Boolean)
    if (!key) throw new Error(`no user key in the component's storage: ${stored}`)
    const r = await fetchPage(pageUrl.replace(/\/$/, '') + '/users/me', { method: 'PUT', headers: { 'x-user-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ userData: { plan: 'gold', visits: 3 } }) })
    if (!r.ok) throw new Error(`PUT /users/me: ${r.status} ${await r.text()}`)
    await say('webchat:getUserData')
    await waitText(/userData: \{"plan":"gold","visits":"3"\}/)
  })
  await step('no request to another origin, no console error, no 4xx/5xx', async () => {
    if (problems.length) throw new Error(problems.join('\n'))
    if (notFound.length) throw new Error(notFound.join('\n'))
  })
  await browser.close()
}

try {
  await main()
} catch (e) {
  if (!failures) console.log(`FAIL ${e.stack || e}`)
  failures++
} finally {
  for (const c of children) c.kill()
}
process.exit(failures ? 1 : 0)
