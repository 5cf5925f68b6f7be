// inbox-nostream-e2e.mjs: the console's inbox on a platform that does not
// serve the hitl integration (PLATFORM_BUILTINS=chat): the stream ticket
// says served: false, the console opens no inbox stream and polls the
// agent API quietly: no failed load, no page error in either browser's
// console (run by inbox-e2e.sh after inbox-e2e.mjs; PLATFORM_BIN, WORK,
// SHOTS, CHROME, BROWSER as there).
import fs from 'node:fs'
import path from 'node:path'
import { browserRun, openBrowser, sleep, freePort, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const run = browserRun('inbox-nostream-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log'] })
const step = run.step

async function main() {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data-nostream')
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir], { PLATFORM_BUILTINS: 'chat' }, path.join(WORK, 'platform.log'))
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform')
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token')
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const res = await fetch(api + '/v1/admin/workspaces', { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: '{"name":"No desk"}' })
  const { id: ws } = await res.json()

  console.log(`platform ${api} (PLATFORM_BUILTINS=chat)`)
  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, height: 860, viewport: false })
  const lists = []
  const streams = []
  page.on('request', (r) => {
    const u = r.url()
    if (u.includes('/hitl/sessions')) lists.push(Date.now())
    if (u.includes('/v1/chat/hitl/')) streams.push(u)
  })
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.url()}`)
  })
  const waitText = async (sel, re, ms = 15000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const texts = await page.$$eval(sel, (els) => els.map((e) => e.innerText)).catch(() => [])
      if (texts.some((t) => re.test(t))) return
      if (Date.now() > deadline) throw new Error(`no ${sel} matching ${re} within ${ms} ms (found: ${JSON.stringify(texts).slice(0, 300)})`)
      await sleep(50)
    }
  }

  await step('sign in, open the inbox: it says no live stream is served', async () => {
    await page.goto(api + '/', { waitUntil: 'load' })
    await page.evaluate(() => localStorage.setItem('inbox.noStreamPollMs', '300'))
    await page.waitForSelector('#token')
    await page.type('#token', token)
    await page.click('form[data-test=signin] button')
    await waitText('main.page h1', /Workspaces/)
    await page.evaluate((h) => (location.hash = h), `#/w/${ws}/inbox`)
    await waitText('main.page h1', /Inbox/)
    await page.waitForSelector('[data-test=inbox-nostream]')
    await waitText('[data-test=inbox-nostream]', /polling every/)
    await waitText('[data-test=sessions]', /No session here/)
  })
  await step('it polls the agent API, and never opens a stream', async () => {
    // Waits for the polls it asserts (at 300 ms, several within seconds).
    const from = lists.length
    const deadline = Date.now() + 15000
    while (lists.length - from < 4) {
      if (Date.now() > deadline) throw new Error(`${lists.length - from} list reads in 15 s`)
      await sleep(50)
    }
    if (streams.length) throw new Error(`inbox streams opened: ${streams.join(', ')}`)
    await page.screenshot({ path: path.join(SHOTS, 'nostream.png'), fullPage: true })
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main)
