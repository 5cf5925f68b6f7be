// e2e.mjs: the assistant end to end in a headless Chromium (run by e2e.sh,
// which builds the platform and sets PLATFORM_BIN, WORK, SHOTS, CHROME).
// A fake OpenAI-compatible provider on loopback (lib.mjs) records what it
// is sent; a fresh local platform uses it (--llm-url). `assistant create`
// of the platform's binary uploads two documents (refunds.pdf holds the
// answer, shipping.md does not) and prints the bot and its hosted webchat
// page; in the page (the official @botpress/webchat component) a question
// is typed: the provider got the instructions and the PDF's passage (not
// the other document), the user sees the provider's answer with its
// source, and a follow-up carries the history. Then a second platform
// without a model: the user is told no model is configured.
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { browserRun, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import { assistantCreate, checkRequest, fakeProvider, INSTRUCTIONS, writeDocuments } from './lib.mjs'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const ROOT = path.resolve(HERE, '../..')
const puppeteer = createRequire(path.join(ROOT, 'scripts/console/package.json'))('puppeteer-core')
const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const run = browserRun('assistant-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log', 'platform-nomodel.log'] })
const step = run.step

async function platform(name, args) {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, name)
  start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, ...args], {}, path.join(WORK, `${name}.log`))
  await waitHttp(api + '/', (r) => r.status === 200, name)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), `${name}'s admin token`)
  return { api, token: fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim() }
}

run.main(async () => {
  const provider = await fakeProvider()
  const docs = writeDocuments(WORK)
  const browser = await puppeteer.launch({ executablePath: CHROME, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-gpu'] })
  console.log(`browser: ${await browser.version()}`)
  const problems = []
  const newPage = async () => {
    const page = await browser.newPage()
    page.on('console', (m) => m.type() === 'error' && problems.push(`console: ${m.text()}`))
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
    run.page = page
    return page
  }
  const bodyText = (page) => page.$eval('body', (b) => b.innerText).catch(() => '')
  const waitText = async (page, re, ms = 30000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const t = await bodyText(page)
      if (re.test(t)) return t
      if (Date.now() > deadline) throw new Error(`no text matching ${re} within ${ms} ms (page: ${t.slice(-600)})`)
      await sleep(100)
    }
  }
  const ask = async (page, text) => {
    await page.type('.bpComposerInput', text)
    await page.keyboard.press('Enter')
  }

  try {
    const { api, token } = await platform('platform', ['--llm-url', provider.url])
    let created
    await step('assistant create: the documents indexed, the bot deployed, its webchat page printed', async () => {
      const t0 = Date.now()
      created = await assistantCreate(PLATFORM_BIN, ['--api-url', api, '--token', token, '--name', 'Zorblax support',
        '--instructions', INSTRUCTIONS, '--model', provider.model, '--documents', docs.join(',')])
      console.log(`assistant create: ${Date.now() - t0} ms; bot ${created.botId}, page ${created.webchat}`)
      if (!created.webchat.startsWith(api + '/webhooks/')) throw new Error(`webchat URL ${created.webchat}`)
      if (/warning/.test(created.stderr)) throw new Error(`a document was not indexed: ${created.stderr}`)
    })

    const page = await newPage()
    await step('the hosted webchat page opens, connected', async () => {
      await page.goto(created.webchat, { waitUntil: 'load' })
      await page.waitForSelector('.bpComposerInput', { timeout: 30000 })
    })
    const question = 'How long do I have to ask for a refund?'
    await step('a question answered from the PDF: the provider got the passage and the instructions, the user sees the answer and its source', async () => {
      const t0 = Date.now()
      await ask(page, question)
      await waitText(page, /You have 37 days after delivery to ask for a refund\.\s*Sources: refunds\.pdf/)
      console.log(`question to answer shown: ${Date.now() - t0} ms`)
      if (provider.requests.length !== 1) throw new Error(`${provider.requests.length} provider calls, want 1`)
      checkRequest(provider.requests[0], question)
      if (provider.requests[0].model !== provider.model) throw new Error(`model ${provider.requests[0].model}`)
      await page.screenshot({ path: path.join(SHOTS, '01-answer.png'), fullPage: true })
    })
    await step('a follow-up carries the history', async () => {
      const follow = 'Do I need the receipt?'
      await ask(page, follow)
      await waitText(page, /Yes: bring the receipt with you\./)
      const body = provider.requests[1]
      if (!body) throw new Error('no second provider call')
      const roles = body.messages.map((m) => m.role).join(',')
      if (roles !== 'system,user,assistant,user') throw new Error(`the follow-up's roles: ${roles}`)
      if (body.messages[1].content !== question || !body.messages[2].content.startsWith('You have 37 days')) {
        throw new Error(`the follow-up's history: ${JSON.stringify(body.messages.slice(1))}`)
      }
      await page.screenshot({ path: path.join(SHOTS, '02-follow-up.png'), fullPage: true })
    })
    await step('the LLM calls are recorded under the conversation (meta.conversationId)', async () => {
      const ws = (await (await fetch(`${api}/v1/admin/workspaces`, { headers: { authorization: `Bearer ${token}` } })).json()).workspaces[0].id
      const r = await (await fetch(`${api}/v1/admin/bots/${created.botId}/llm-calls`, { headers: { authorization: `Bearer ${token}`, 'x-workspace-id': ws } })).json()
      if (r.calls?.length !== 2 || r.calls.some((c) => !c.conversationId || c.status !== 'ok')) throw new Error(`llm calls: ${JSON.stringify(r)}`)
    })

    const bare = await platform('platform-nomodel', [])
    await step('without a configured model: the user is told clearly', async () => {
      const mute = await assistantCreate(PLATFORM_BIN, ['--api-url', bare.api, '--token', bare.token, '--name', 'No model', '--documents', docs[0]])
      const p = await newPage()
      await p.goto(mute.webchat, { waitUntil: 'load' })
      await p.waitForSelector('.bpComposerInput', { timeout: 30000 })
      await ask(p, 'Hello?')
      await waitText(p, /no language model is configured on this platform\. Its operator must set PLATFORM_LLM_URL/)
      await p.screenshot({ path: path.join(SHOTS, '03-no-model.png'), fullPage: true })
    })
    await step('no console error in the pages', async () => {
      if (problems.length) throw new Error(problems.join('\n'))
    })
  } finally {
    await browser.close().catch(() => {})
    provider.close()
  }
})
