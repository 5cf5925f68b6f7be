// health-e2e.mjs: the console's health page (shared/console/static/health.js)
// end to end in headless Chromium, then Firefox (run by scripts/health/e2e.sh,
// which builds the platform and sets PLATFORM_BIN, WORK, SHOTS, CHROME). A
// fresh local platform sampling its metrics every second, a workload through
// the API (messages to a bot answering 200 and to one answering 500, LLM
// calls through a fake provider), then in the browser: the health page's
// charts (requests, latency, deliveries, outbox age, streams, LLM tokens by
// model) and a bot's metrics page show that workload, under the console's CSP
// with no console error. Screenshots go to SHOTS.
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { browserRun, openBrowser, children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const servers = []
const run = browserRun('health-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log'] })
const step = run.step

const listen = async (handler) => {
  const s = http.createServer(handler)
  await new Promise((r) => s.listen(0, '127.0.0.1', r))
  servers.push(s)
  return `http://127.0.0.1:${s.address().port}`
}

async function main() {
  // A fake OpenAI-compatible provider: fixed answer, 17 + 5 tokens.
  const llmUrl = (await listen((req, res) => {
    req.resume()
    req.on('end', () => {
      res.setHeader('content-type', 'application/json')
      if (req.url === '/v1/models') return res.end(JSON.stringify({ object: 'list', data: [{ id: 'fake-llm', object: 'model' }] }))
      res.end(JSON.stringify({ id: 'c1', object: 'chat.completion', model: 'fake-llm',
        choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 17, completion_tokens: 5, total_tokens: 22 } }))
    })
  })) + '/v1'
  // Two bots' endpoints: one answers every event, one fails (500).
  const goodBot = await listen((req, res) => { req.resume(); req.on('end', () => res.end('{}')) })
  const badBot = await listen((req, res) => { req.resume(); req.on('end', () => { res.statusCode = 500; res.end('{}') }) })

  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, '--llm-url', llmUrl],
    { PLATFORM_METRICS_STEP_SECONDS: '1' }, path.join(WORK, 'platform.log'))
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform')
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token')
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const call = async (method, p, body, headers = {}) => {
    const r = await fetch(api + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const j = await r.json()
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(j)}`)
    return j
  }

  let ws, bot
  const N = 8
  await step('a workload through the API: messages to two bots, LLM calls', async () => {
    ws = (await call('POST', '/v1/admin/workspaces', { name: 'health' })).id
    for (const [name, url, n] of [['good', goodBot, N], ['bad', badBot, 2]]) {
      const id = (await call('POST', '/v1/admin/bots', { name, url }, { 'x-workspace-id': ws })).bot.id
      if (name === 'good') bot = id
      const h = { 'x-bot-id': id }
      const conv = (await call('POST', '/v1/chat/conversations', { channel: 'web', tags: {} }, h)).conversation.id
      const user = (await call('POST', '/v1/chat/users', { tags: {} }, h)).user.id
      for (let i = 0; i < n; i++) await call('POST', '/v1/chat/messages', { conversationId: conv, userId: user, type: 'text', payload: { text: `m${i}` }, tags: {} }, h)
    }
    for (let i = 0; i < 3; i++) await call('POST', '/v2/cognitive/generate-text', { messages: [{ role: 'user', content: 'hi' }] }, { 'x-bot-id': bot })
  })

  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, allowed: [api] })
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // A chart's state, polled from here (page.waitForFunction builds a
  // function in the page, which the CSP refuses under Firefox's BiDi).
  const chart = (name) => page.$eval(`[data-test=chart-${name}]`, (e) => ({
    total: Number(e.dataset.total), lines: e.dataset.lines.split(',').filter(Boolean),
    sums: Object.fromEntries(e.dataset.sums.split(';').filter(Boolean).map((kv) => { const i = kv.lastIndexOf('='); return [kv.slice(0, i), Number(kv.slice(i + 1))] })),
    canvases: e.querySelectorAll('canvas').length, legend: e.innerText,
  })).catch(() => null)
  const waitChart = async (name, ok, what, ms = 30000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const c = await chart(name)
      if (c && ok(c)) return c
      if (Date.now() > deadline) throw new Error(`chart ${name}: ${what} not within ${ms} ms (last: ${JSON.stringify(c)})`)
      await sleep(200)
    }
  }

  await step('sign in', async () => {
    await page.goto(api + '/', { waitUntil: 'load' })
    await page.waitForSelector('#token')
    await page.type('#token', token)
    await page.click('form[data-test=signin] button')
    await page.waitForSelector('header.top')
  })
  await step('the health page charts the workload', async () => {
    await page.click('header.top a[href="#/health"]')
    const req = await waitChart('requests', (c) => c.total >= N + 2 + 3 && c.canvases > 0 && c.lines.includes('requests'), 'the requests counted')
    console.log(`     requests chart: total ${req.total}, lines ${req.lines}`)
    await waitChart('latency', (c) => c.total > 0 && c.lines.includes('p95'), 'a latency')
    await waitChart('deliveries', (c) => c.lines.includes('delivered') && c.canvases > 0 && c.total >= N, 'the deliveries')
    await waitChart('outboxAge', (c) => c.canvases > 0, 'the outbox age drawn')
    await waitChart('streams', (c) => c.canvases > 0, 'the open streams drawn')
    const llm = await waitChart('llmTokens', (c) => c.lines.length === 1 && c.total === 3 * 22 && c.canvases > 0, 'the tokens of 3 calls by model')
    console.log(`     LLM tokens by model: ${llm.lines} ${llm.total}`)
    await shot('01-health-hour')
  })
  await step('the failing bot shows in the failed deliveries', async () => {
    // Retried 1, 2, 4, 8 s apart, then failed: 15 s after its messages;
    // the outbox age grows meanwhile.
    const d = await waitChart('deliveries', (c) => c.sums.failed === 2 && c.sums.retried === 8 && c.sums.delivered === N, `${N} delivered, 8 retried, 2 failed`, 45000)
    console.log(`     deliveries: ${JSON.stringify(d.sums)}`)
    const age = await waitChart('outboxAge', (c) => c.total > 0, 'an outbox age while the failing bot is retried')
    console.log(`     outbox age summed over the points: ${age.total}`)
    await shot('02-health-failures')
  })
  await step('the day window', async () => {
    await page.click('[data-test=win-day]')
    await waitChart('requests', (c) => c.lines.includes('requests'), 'the day chart')
    await shot('03-health-day')
  })
  await step("a bot's metrics page: its messages and LLM tokens", async () => {
    await page.goto(`${api}/#/w/${ws}/b/${bot}`, { waitUntil: 'load' })
    await page.waitForSelector('[data-test=bot-nav]')
    await page.click(`[data-test=bot-nav] a[href="#/w/${ws}/b/${bot}/metrics"]`)
    const m = await waitChart('messages', (c) => c.total === 2 * N && c.canvases > 0, `${N} messages and ${N} events`)
    console.log(`     bot messages chart: ${m.lines} ${m.total}`)
    await waitChart('llmTokens', (c) => c.total === 3 * 22, 'its tokens')
    await shot('04-bot-metrics')
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main, () => { for (const s of servers) s.close() })
