// chat.mjs: the assistant end to end through the official @botpress/chat
// client (0.5.5), the way a site's own chat UI talks to it: `assistant
// create` (the local binary, LOCAL_BIN) deploys it to a running platform
// (PLATFORM_BIN: ./functions/local, or with AWS_LOCAL=1 the AWS build
// ./functions/aws-local, its Lambda functions and API Gateway routes; make
// assistant-e2e-aws), whose LLM is a fake OpenAI-compatible provider on
// loopback (lib.mjs); an end user connects to the assistant's webchat
// installation (its Chat API), asks a question answered only by the PDF,
// and a follow-up. Checks what the provider got (the passage, the
// instructions, the history) and what the user got.
import fs from 'node:fs'
import path from 'node:path'
import { children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import chat from '@botpress/chat'
import { assistantCreate, checkRequest, fakeProvider, INSTRUCTIONS, writeDocuments } from './lib.mjs'

const { PLATFORM_BIN, LOCAL_BIN, WORK } = process.env
const AWS_LOCAL = process.env.AWS_LOCAL === '1'
let failed = 0
let created
let diagnose = async () => {}
const step = async (name, fn) => {
  const t0 = Date.now()
  try {
    await fn()
    console.log(`ok   ${name} (${Date.now() - t0} ms)`)
  } catch (e) {
    failed++
    console.log(`FAIL ${name}: ${e.stack || e}`)
    throw e
  }
}

async function main() {
  const provider = await fakeProvider()
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  const args = ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir]
  // The AWS build takes the provider as the stack's parameter LlmUrl.
  args.push(...(AWS_LOCAL ? ['--parameter', `LlmUrl=${provider.url}`] : ['--llm-url', provider.url]))
  start(PLATFORM_BIN, args, {}, path.join(WORK, 'platform.log'))
  const ready = AWS_LOCAL ? 600000 : 30000
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform', ready)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token', ready)
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const docs = writeDocuments(WORK)

  diagnose = async () => {
    if (!created) return
    const h = { authorization: `Bearer ${token}` }
    const ws = (await (await fetch(`${api}/v1/admin/workspaces`, { headers: h })).json()).workspaces?.[0]?.id
    const since = new Date(Date.now() - 3600e3).toISOString()
    const logs = await (await fetch(`${api}/v1/admin/bots/${created.botId}/logs?timeStart=${since}&pageSize=50`, { headers: { ...h, 'x-workspace-id': ws } })).json()
    console.log('--- the bot\'s log, newest first ---\n' + (logs.logs || [logs]).map((l) => `${l.timestamp} ${l.level} ${l.message}`).join('\n').slice(0, 6000))
  }
  await step(`assistant create against ${AWS_LOCAL ? 'the AWS build' : 'the local platform'}`, async () => {
    const t0 = Date.now()
    created = await assistantCreate(LOCAL_BIN, ['--api-url', api, '--token', token, '--name', 'Zorblax support',
      '--instructions', INSTRUCTIONS, '--model', provider.model, '--documents', docs.join(',')])
    console.log(`assistant create: ${Date.now() - t0} ms; bot ${created.botId}, page ${created.webchat}`)
    if (/warning/.test(created.stderr)) throw new Error(`a document was not indexed: ${created.stderr}`)
  })

  const client = await chat.Client.connect({ apiUrl: created.webchat.replace(/\/$/, '') })
  const { conversation } = await client.createConversation({})
  const listener = await client.listenConversation({ id: conversation.id })
  const seen = []
  listener.on('message_created', (m) => m.isBot && seen.push(m.payload.text))
  const botSays = async (re, ms = AWS_LOCAL ? 120000 : 30000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const t = seen.find((x) => re.test(x))
      if (t) return t
      if (Date.now() > deadline) throw new Error(`the bot did not say ${re} within ${ms} ms (it said ${JSON.stringify(seen)})`)
      await sleep(50)
    }
  }
  const question = 'How long do I have to ask for a refund?'
  await step('a question answered from the PDF: the provider got the passage and the instructions; the answer and its source reach the user', async () => {
    const t0 = Date.now()
    await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: question } })
    await botSays(/^You have 37 days after delivery to ask for a refund\.\n\nSources: refunds\.pdf$/)
    console.log(`question to answer: ${Date.now() - t0} ms (the bot's first message: its worker's cold start included)`)
    if (provider.requests.length !== 1) throw new Error(`${provider.requests.length} provider calls, want 1`)
    checkRequest(provider.requests[0], question)
  })
  await step('a follow-up carries the history', async () => {
    const t0 = Date.now()
    await client.createMessage({ conversationId: conversation.id, payload: { type: 'text', text: 'Do I need the receipt?' } })
    await botSays(/^Yes: bring the receipt with you\./)
    console.log(`follow-up to answer: ${Date.now() - t0} ms`)
    const roles = provider.requests[1].messages.map((m) => m.role).join(',')
    if (roles !== 'system,user,assistant,user' || provider.requests[1].messages[1].content !== question) {
      throw new Error(`the follow-up's messages: ${JSON.stringify(provider.requests[1].messages)}`)
    }
  })
  await listener.disconnect()
  provider.close()
}

main()
  .catch((e) => {
    if (!failed) console.log(`FAIL set-up: ${e.stack || e}`)
    failed = failed || 1
  })
  .finally(async () => {
    if (failed) await diagnose().catch((e) => console.log(`no bot log: ${e.message}`))
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
    if (failed) {
      const log = path.join(WORK, 'platform.log')
      if (fs.existsSync(log)) console.log('--- last lines of platform.log ---\n' + fs.readFileSync(log, 'utf8').split('\n').slice(-40).join('\n'))
    }
    console.log(`assistant chat e2e${AWS_LOCAL ? ' (aws-local)' : ''}: ${failed ? 'FAILED' : 'passed'}`)
    process.exit(failed ? 1 : 0)
  })
