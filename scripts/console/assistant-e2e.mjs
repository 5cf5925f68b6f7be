// assistant-e2e.mjs: the console's assistant path end to end (run by
// assistant-e2e.sh, which builds the platform and sets PLATFORM_BIN, WORK,
// SHOTS, CHROME, BROWSER). A fake OpenAI-compatible provider on loopback
// (two models; it records every request), a fresh local platform using it,
// and in the browser: "New assistant" with a name, instructions, two
// documents (uploaded and indexed, with progress) and an advanced setting
// (one passage), its model chosen, the buttons to its hosted webchat page
// and the emulator; in the emulator a question answered from the right
// document, with the passage retrieved and the turn's LLM call (model,
// tokens, latency) under the answer; the settings page's new instructions
// used by the next message, which carries the history. Then a platform
// without a model: the console says so on "New assistant", and the
// assistant tells the user. No console error, no request leaving the
// machine.
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { browserRun, openBrowser, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import { samplePDF } from '../assistant/lib.mjs'
import puppeteer from 'puppeteer-core'

const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const servers = []
const run = browserRun('assistant-console-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log', 'platform-nomodel.log'] })
const step = run.step

// The documents: the answer is only in the handbook, a PDF.
const DOCS = {
  'handbook.pdf': samplePDF(['Refunds', 'The refund window is 37 days from the date of purchase. Keep the receipt: refunds need it.']),
  'garden.md': '# The office garden\n\nThe ficus by the window is watered every Tuesday by the facilities team.\n',
}

async function until(what, f, ms = 20000) {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await f()
    if (v) return v
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
    await sleep(50)
  }
}

// startPlatform starts a local platform (args added) and answers its URL
// and the first account's token.
async function startPlatform(name, args) {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, `data-${name}`)
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, ...args], {}, path.join(WORK, `${name}.log`))
  await waitHttp(api + '/', (r) => r.status === 200, `the platform (${name})`)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token')
  return { api, dataDir, token: fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim() }
}

async function main() {
  // A fake OpenAI-compatible provider: two models; it answers from the
  // system message (the instructions and the passages) it is sent, and
  // records every chat request.
  const sent = []
  const llm = http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      if (req.method === 'GET' && req.url === '/v1/models') return res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-small', object: 'model' }, { id: 'fake-large', object: 'model' }] }))
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        const b = JSON.parse(body)
        sent.push(b)
        const system = b.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n')
        const question = String(b.messages.at(-1).content)
        let answer = 'CANNOT_ANSWER'
        if (/refund window/i.test(question) && system.includes('37 days')) answer = 'The refund window is 37 days.'
        else if (/receipt/i.test(question) && system.includes('receipt')) answer = 'Yes: keep the receipt, refunds need it.'
        return res.end(JSON.stringify({ id: 'chatcmpl-e2e', object: 'chat.completion', model: b.model,
          choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 17, completion_tokens: 5, total_tokens: 22 } }))
      }
      res.statusCode = 404
      res.end('{}')
    })
  })
  await new Promise((resolve) => llm.listen(0, '127.0.0.1', resolve))
  servers.push(llm)
  const llmUrl = `http://127.0.0.1:${llm.address().port}/v1`

  const A = await startPlatform('platform', ['--llm-url', llmUrl])
  const B = await startPlatform('platform-nomodel', [])
  const admin = async (P, method, p, body, headers = {}) => {
    const res = await fetch(P.api + p, { method, headers: { authorization: `Bearer ${P.token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const out = await res.json()
    if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${JSON.stringify(out)}`)
    return out
  }
  const docDir = path.join(WORK, 'docs')
  fs.mkdirSync(docDir, { recursive: true })
  for (const [k, v] of Object.entries(DOCS)) fs.writeFileSync(path.join(docDir, k), v)
  console.log(`platform ${A.api} (models: ${llmUrl}), platform without a model ${B.api}, screenshots in ${SHOTS}`)

  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, where: true, allowed: [A.api, B.api] })
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // Polled from here (page.waitForFunction builds a function in the page,
  // which the console's CSP refuses under Firefox's BiDi).
  const texts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.innerText)).catch(() => [])
  const waitText = async (sel, re, ms = 20000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const ts = await texts(sel)
      if (ts.some((t) => re.test(t))) return ts
      if (Date.now() > deadline) throw new Error(`no ${sel} matching ${re} within ${ms} ms (found: ${JSON.stringify(ts).slice(0, 400)})`)
      await sleep(50)
    }
  }
  const type = async (sel, value) => {
    await page.waitForSelector(sel)
    await page.$eval(sel, (e) => (e.value = ''))
    await page.type(sel, value)
  }
  const signIn = async (P) => {
    await page.goto(P.api + '/', { waitUntil: 'load' })
    await page.waitForSelector('#token')
    await page.type('#token', P.token)
    await page.click('form[data-test=signin] button')
    await page.waitForSelector('header.top')
  }
  const ask = async (text) => {
    await type('form[data-test=composer] input', text)
    await page.click('form[data-test=composer] button')
  }

  let ws, bot
  await step('sign in; "New assistant" from the workspace', async () => {
    ws = (await admin(A, 'POST', '/v1/admin/workspaces', { name: 'Shop' })).id
    await signIn(A)
    await page.goto(`${A.api}/#/w/${ws}`, { waitUntil: 'load' })
    await page.waitForSelector(`header.top a[href="#/w/${ws}/assistant/new"]`)
    await page.click(`header.top a[href="#/w/${ws}/assistant/new"]`)
    await page.waitForSelector('form[data-test=new-assistant]')
    // The defaults are the assistant's (GET /v1/admin/assistant).
    const instr = await page.$eval('[data-test=instructions]', (e) => e.value)
    if (!/helpful assistant/.test(instr)) throw new Error(`default instructions: ${instr}`)
  })
  await step('name, instructions, two documents, one passage; create: uploaded and indexed with progress', async () => {
    await type('[data-test=name]', 'Refunds helper')
    await type('[data-test=instructions]', 'You are Refundo, the shop\'s refunds helper. Answer briefly.')
    const input = await page.$('[data-test=documents]')
    await input.uploadFile(...Object.keys(DOCS).map((k) => path.join(docDir, k)))
    // The model is chosen before the bot exists (listAssistantModels).
    await page.waitForSelector('form[data-test=new-assistant] select[data-test=model]')
    const options = await page.$$eval('[data-test=model] option', (os) => os.map((o) => o.value))
    if (!options.includes('openai:fake-large') || !options.includes('openai:fake-small')) throw new Error(`models offered: ${options}`)
    await page.select('[data-test=model]', 'openai:fake-large')
    await page.click('[data-test=advanced] summary')
    await type('input[name=passages]', '1')
    await shot('01-new-assistant')
    const t0 = Date.now()
    await page.click('form[data-test=new-assistant] button')
    await waitText('[data-test=documents-progress]', /handbook\.pdf: indexing_completed/)
    await waitText('[data-test=documents-progress]', /garden\.md: indexing_completed/)
    console.log(`     "Create assistant" to deployed with both documents indexed: ${Date.now() - t0} ms`)
    await waitText('[data-test=steps]', /code is deployed/)
    bot = (await page.$eval('[data-test=steps] code', (e) => e.innerText)).trim()
    // Deployed like any bot: its code and settings through the public API.
    const b = (await admin(A, 'GET', `/v1/admin/bots/${bot}`, undefined, { 'x-workspace-id': ws })).bot
    const d = b.configuration?.data || {}
    if (!b.deployedAt || d.passages !== 1 || !/Refundo/.test(d.instructions) || d.kbIds?.length !== 1 || d.model !== 'openai:fake-large' || b.tags?.assistant !== 'v1') throw new Error(`the bot: deployed ${b.deployedAt}, settings ${JSON.stringify(d)}`)
    const files = (await admin(A, 'GET', `/v1/files?tags[kbId]=${d.kbIds[0]}`, undefined, { 'x-bot-id': bot })).files
    if (files.length !== 2 || files.some((f) => f.status !== 'indexing_completed')) throw new Error(`its documents: ${JSON.stringify(files.map((f) => [f.key, f.status]))}`)
  })
  await step('its model shown; the hosted webchat page and the emulator are a click away', async () => {
    await waitText('[data-test=created] [data-test=model-name]', /openai:fake-large/)
    await page.waitForSelector('[data-test=webchat-link]')
    const href = await page.$eval('[data-test=webchat-link]', (a) => a.href)
    if (!href.startsWith(`${A.api}/webhooks/`)) throw new Error(`webchat page: ${href}`)
    const r = await fetch(href)
    if (r.status !== 200 || !/text\/html/.test(r.headers.get('content-type'))) throw new Error(`the webchat page answers ${r.status} ${r.headers.get('content-type')}`)
    await shot('02-created')
  })
  await step('the emulator: the answer, the passage it came from and the LLM call under it', async () => {
    await page.click('[data-test=emulator-link]')
    await page.waitForSelector('form[data-test=composer]')
    const t0 = Date.now()
    await ask('How long is the refund window?')
    await waitText('[data-test=bot-message]', /The refund window is 37 days\.\s+Sources: handbook\.pdf/)
    const answered = Date.now() - t0
    await waitText('[data-test=bot-message] [data-test=passage]', /handbook\.pdf[\s\S]*37 days/)
    console.log(`     question to answer shown: ${answered} ms; to its passage shown: ${Date.now() - t0} ms (the emulator polls every second; the first message starts the bot's worker)`)
    const passages = await texts('[data-test=passage]')
    if (passages.length !== 1) throw new Error(`passages shown: ${JSON.stringify(passages)}`)
    await waitText('[data-test=bot-message] [data-test=llm-call]', /LLM openai:fake-large · 17 in \/ 5 out tokens · \d+ ms/)
    // What the provider was sent: the model chosen, the instructions, the
    // passage holding the answer and not the other document.
    const last = sent.at(-1)
    const system = last.messages.filter((m) => m.role === 'system').map((m) => m.content).join('\n')
    if (last.model !== 'fake-large' || !system.includes('Refundo') || !system.includes('37 days') || system.includes('ficus')) throw new Error(`the provider got: ${JSON.stringify(last).slice(0, 600)}`)
    await shot('03-emulator-answer')
  })
  await step('the settings page: new instructions apply to the next message, which carries the history', async () => {
    await page.click('[data-test=assistant-link]')
    await page.waitForSelector('form[data-test=assistant-settings]')
    await waitText('[data-test=documents]', /handbook\.pdf[\s\S]*indexing_completed/)
    const model = await page.$eval('form[data-test=assistant-settings] [data-test=model]', (e) => e.value)
    if (model !== 'openai:fake-large') throw new Error(`the model shown: ${model}`)
    await type('form[data-test=assistant-settings] [data-test=instructions]', 'You are Refundo 2, polite and brief.')
    await page.click('form[data-test=assistant-settings] button')
    await waitText('[data-test=settings-saved]', /next message/)
    await shot('04-settings')
    const before = sent.length
    await page.click(`nav.sub a[href="#/w/${ws}/b/${bot}/emulator"]`)
    await page.waitForSelector('form[data-test=composer]')
    await waitText('[data-test=bot-message]', /37 days/) // the same conversation
    await ask('Do I need the receipt?')
    await waitText('[data-test=bot-message]', /keep the receipt/)
    const last = await until('the second request', () => sent.length > before && sent.at(-1))
    const all = last.messages.map((m) => `${m.role}: ${m.content}`).join('\n')
    if (!all.includes('Refundo 2') || !all.includes('user: How long is the refund window?') || !all.includes('assistant: The refund window is 37 days.')) throw new Error(`the provider got: ${all.slice(0, 800)}`)
    await waitText('[data-test=llm-call]', /openai:fake-large/)
    const calls = await texts('[data-test=bot-message] [data-test=llm-call]')
    if (calls.length !== 2) throw new Error(`LLM calls under the answers: ${JSON.stringify(calls)}`)
    await shot('05-emulator-second-turn')
  })
  await step('handover turned on in the settings installs hitl, and leaves the webchat page as it was', async () => {
    const h = { 'x-workspace-id': ws }
    const pageBefore = (await admin(A, 'GET', `/v1/admin/bots/${bot}/webchat?type=sharableUrl`, undefined, h)).code
    await page.goto(`${A.api}/#/w/${ws}/b/${bot}/assistant`, { waitUntil: 'load' })
    await page.waitForSelector('form[data-test=assistant-settings] [data-test=model]')
    await page.click('form[data-test=assistant-settings] [data-test=advanced] summary')
    await page.click('form[data-test=assistant-settings] input[name=handover]')
    await page.click('form[data-test=assistant-settings] button')
    await waitText('[data-test=settings-saved]', /next message/)
    let b = (await admin(A, 'GET', `/v1/admin/bots/${bot}`, undefined, h)).bot
    const names = Object.values(b.integrations).map((i) => i.name).sort().join()
    if (b.configuration.data.handover !== true || names !== 'hitl,webchat') throw new Error(`handover ${b.configuration.data.handover}, integrations ${names}`)
    const pageAfter = (await admin(A, 'GET', `/v1/admin/bots/${bot}/webchat?type=sharableUrl`, undefined, h)).code
    if (pageAfter !== pageBefore) throw new Error(`the webchat page moved: ${pageBefore} -> ${pageAfter}`)
    // And off again (the steps below chat with it).
    await page.click('form[data-test=assistant-settings] input[name=handover]')
    await page.click('form[data-test=assistant-settings] button')
    await until('handover off', async () => (await admin(A, 'GET', `/v1/admin/bots/${bot}`, undefined, h)).bot.configuration.data.handover === false)
  })
  if (!FIREFOX) {
    // Firefox ESR's BiDi does not emulate a viewport (as console-e2e).
    await step('phone-sized screen: the emulator with passages, New assistant, the settings', async () => {
      await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true })
      const wide = async (r, sel, name) => {
        await page.goto('about:blank')
        await page.goto(`${A.api}/#${r}`, { waitUntil: 'load' })
        await page.waitForSelector(sel)
        await shot(name)
        const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)
        if (over > 0) throw new Error(`${r} is ${over}px wider than the phone's screen`)
      }
      await wide(`/w/${ws}/b/${bot}/emulator`, '[data-test=passage]', '05b-phone-emulator')
      await wide(`/w/${ws}/assistant/new`, 'form[data-test=new-assistant]', '05c-phone-new')
      await wide(`/w/${ws}/b/${bot}/assistant`, '[data-test=documents]', '05d-phone-settings')
      await page.setViewport({ width: 1280, height: 900 })
    })
  }
  await step('the files page indexes an upload when asked, its progress following the indexing', async () => {
    await page.goto(`${A.api}/#/w/${ws}/b/${bot}/files`, { waitUntil: 'load' })
    await page.waitForSelector('form[data-test=upload]')
    const input = await page.$('form[data-test=upload] input[type=file]')
    const notes = path.join(WORK, 'notes.txt')
    fs.writeFileSync(notes, 'Opening hours: 9 to 5.\n')
    await input.uploadFile(notes)
    await page.click('form[data-test=upload] input[type=checkbox]')
    await page.click('form[data-test=upload] button')
    await waitText('[data-test=upload-status]', /notes\.txt: indexing_completed/)
    await waitText('[data-test=files]', /notes\.txt[\s\S]*indexing_completed/)
  })
  await step("an assistant without the tag (an older `assistant create`) has its settings page; another bot has none", async () => {
    const h = { 'x-workspace-id': ws }
    const { defaults } = await admin(A, 'GET', '/v1/admin/assistant')
    const made = (await admin(A, 'POST', '/v1/admin/bots', { name: 'made by the command' }, h)).bot.id
    await admin(A, 'PUT', `/v1/admin/bots/${made}`, { configuration: { data: { ...defaults, instructions: 'From the command.' } } }, h)
    const plain = (await admin(A, 'POST', '/v1/admin/bots', { name: 'plain' }, h)).bot.id
    await page.goto(`${A.api}/#/w/${ws}/b/${made}`, { waitUntil: 'load' })
    await page.waitForSelector('[data-test=assistant-link]')
    await page.click('[data-test=assistant-link]')
    await page.waitForSelector('form[data-test=assistant-settings]')
    const instr = await page.$eval('form[data-test=assistant-settings] [data-test=instructions]', (e) => e.value)
    if (instr !== 'From the command.') throw new Error(`its instructions: ${instr}`)
    await waitText('[data-test=no-webchat]', /not installed/) // and no 404 asked for
    await page.goto(`${A.api}/#/w/${ws}/b/${plain}`, { waitUntil: 'load' })
    await page.waitForSelector('[data-test=bot-nav]')
    await waitText('main.page h1', /plain/)
    if (await page.$('[data-test=assistant-link]')) throw new Error('a plain bot has an Assistant link')
  })
  await step('a viewer sees the assistant pages with their controls off, and why', async () => {
    await admin(A, 'POST', '/v1/admin/workspace-members', { email: 'viewer@example.com', role: 'viewer' }, { 'x-workspace-id': ws })
    const viewer = { ...A, token: fs.readFileSync(path.join(A.dataDir, 'account-tokens', 'viewer@example.com'), 'utf8').trim() }
    await page.click('header.top .who button')
    await signIn(viewer)
    const disabled = (sel) => page.$eval(sel, (e) => e.disabled)
    await page.goto(`${A.api}/#/w/${ws}/assistant/new`, { waitUntil: 'load' })
    await waitText('[data-test=refused]', /Your role in this workspace is viewer: creating and changing assistants needs developer or above\./)
    if (!(await disabled('form[data-test=new-assistant] button'))) throw new Error('the viewer can press Create assistant')
    await page.goto(`${A.api}/#/w/${ws}/b/${bot}/assistant`, { waitUntil: 'load' })
    await waitText('[data-test=refused]', /viewer: creating and changing assistants/)
    await waitText('[data-test=model-name]', /openai:fake-large/)
    if (!(await disabled('form[data-test=assistant-settings] button'))) throw new Error('the viewer can press Save settings')
    await waitText('[data-test=documents]', /handbook\.pdf/)
    await shot('06-viewer')
  })
  await step('without a model: "New assistant" says so, and the assistant tells the user', async () => {
    const wsB = (await admin(B, 'POST', '/v1/admin/workspaces', { name: 'No model' })).id
    await signIn(B)
    await page.goto(`${B.api}/#/w/${wsB}/assistant/new`, { waitUntil: 'load' })
    await page.waitForSelector('form[data-test=new-assistant]')
    // Said in the form, before anything is created.
    await waitText('[data-test=no-model]', /No language model is configured[\s\S]*PLATFORM_LLM_URL/)
    await type('[data-test=name]', 'Unconfigured')
    await page.click('form[data-test=new-assistant] button')
    await page.waitForSelector('[data-test=created]')
    await shot('07-no-model')
    await page.click('[data-test=emulator-link]')
    await page.waitForSelector('form[data-test=composer]')
    await ask('Hello?')
    await waitText('[data-test=bot-message]', /no language model is configured[\s\S]*PLATFORM_LLM_URL/)
    await waitText('[data-test=assistant-turn]', /no-model/)
    await shot('08-no-model-emulator')
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main, () => { for (const s of servers) s.close() })
