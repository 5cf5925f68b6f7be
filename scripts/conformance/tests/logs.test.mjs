// Bot and integration logs (getBotLogs, getIntegrationLogs) and bot issues
// (listBotIssues, getBotIssue, deleteBotIssue, listBotIssueEvents), with
// the lines and issues the platform itself writes: deliveries of recurring
// events to a local bot server (failing ones become a bot issue) and
// registrations with a local integration server.
import assert from 'node:assert/strict'
import http from 'node:http'
import { after, describe, test } from 'node:test'
import { expectValid } from '../lib/schema.mjs'
import { client, expectApiError, newAccount, newWorkspace, subMinuteSchedules, unique } from '../lib/env.mjs'

const servers = []
after(() => servers.forEach((s) => s.close()))

/** receiver starts an HTTP server answering every request with answer(). */
async function receiver(answer = () => [200, '{}']) {
  const r = { calls: 0, answer }
  const srv = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      r.calls++
      const [status, text] = r.answer()
      res.writeHead(status, { 'content-type': 'application/json' }).end(text)
    })
  })
  srv.keepAliveTimeout = 100
  await new Promise((ok) => srv.listen(0, '127.0.0.1', ok))
  servers.push(srv)
  r.url = `http://127.0.0.1:${srv.address().port}`
  return r
}

const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms))

async function until(what, check, ms = 15000) {
  const end = Date.now() + ms
  let lastErr // a check that throws is retried: only the time up fails
  for (;;) {
    try {
      const v = await check()
      if (v) return v
    } catch (err) {
      lastErr = err
    }
    if (Date.now() > end) assert.fail(`timed out waiting for ${what}${lastErr ? `; last error: ${lastErr.stack ?? lastErr}` : ''}`)
    await sleep(200)
  }
}

/**
 * validBot validates a bot or integration response, less what the spec adds
 * to the reference (Bot.secrets, Integration.signingSecret).
 */
function validBot(op, res) {
  const copy = structuredClone(res)
  if (copy.bot) delete copy.bot.secrets
  if (copy.integration) delete copy.integration.signingSecret
  expectValid(op, copy)
  return res
}

const every = (type) => ({ schedule: { cron: '* * * * * *' }, type, payload: {} })
const minutesAgo = (n) => new Date(Date.now() - n * 60000).toISOString()

/** allLogs pages through getBotLogs / getIntegrationLogs with nextToken. */
async function allLogs(call, params) {
  const out = []
  let pages = 0
  for (let nextToken; ; ) {
    const res = await call({ ...params, nextToken })
    pages++
    out.push(...res.logs)
    if (!res.nextToken) return { logs: out, pages }
    assert.equal(res.logs.length, 20, 'a page before the last is full (default page size)')
    nextToken = res.nextToken
  }
}

describe('logs and issues', () => {
  test('failed deliveries to a bot are logged and grouped into one issue', { skip: subMinuteSchedules }, async () => {
    const { api } = await newWorkspace()
    const botSrv = await receiver(() => [500, '{"message":"kaboom"}'])
    // Five recurring events a second, all failing.
    const recurringEvents = Object.fromEntries(['a', 'b', 'c', 'd', 'e'].map((n) => [n, every('tick')]))
    const { bot } = validBot('createBot', await api.createBot({ url: botSrv.url, recurringEvents }))
    const timeStart = minutesAgo(1)

    const issue = await until('a bot issue with events', async () => {
      const res = expectValid('listBotIssues', await api.listBotIssues({ id: bot.id }))
      return res.issues.length === 1 && res.issues[0].eventsCount >= 25 && res.issues[0]
    })
    assert.equal(issue.code, 'bot_http_500')
    assert.equal(issue.category, 'user_code')
    assert.equal(issue.groupedData.url.raw, botSrv.url)
    assert.equal(issue.groupedData.statusCode.raw, '500')
    assert.ok(issue.lastSeenAt >= issue.createdAt)

    // Stop the failures, then read everything logged so far.
    validBot('updateBot', await api.updateBot({ id: bot.id, recurringEvents: Object.fromEntries(Object.keys(recurringEvents).map((n) => [n, null])) }))
    await sleep(1500)
    const timeEnd = new Date().toISOString()

    const got = expectValid('getBotIssue', await api.getBotIssue({ id: bot.id, issueId: issue.id })).issue
    assert.equal(got.id, issue.id)
    assert.ok(got.eventsCount >= issue.eventsCount)
    const { issueEvents } = expectValid('listBotIssueEvents', await api.listBotIssueEvents({ id: bot.id, issueId: issue.id }))
    assert.equal(issueEvents.length, Math.min(got.eventsCount, 100))
    assert.match(issueEvents[0].data.error.raw, /500/)
    assert.ok(['a', 'b', 'c', 'd', 'e'].includes(issueEvents[0].data.recurringEvent.raw))

    // The logs: every failure, newest first, over several pages.
    const res = expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart, timeEnd }))
    assert.equal(res.logs.length, 20)
    assert.ok(res.nextToken)
    const { logs, pages } = await allLogs((p) => api.getBotLogs(p).then((r) => expectValid('getBotLogs', r)), { id: bot.id, timeStart, timeEnd })
    assert.ok(pages >= 2)
    assert.equal(logs.length, got.eventsCount, 'one line per delivery')
    for (let i = 1; i < logs.length; i++) assert.ok(logs[i].timestamp <= logs[i - 1].timestamp, 'newest first')
    assert.ok(logs.every((l) => l.level === 'error' && /recurring event "[a-e]"/.test(l.message) && /answered 500/.test(l.message)))

    // Filters.
    const onlyA = await allLogs((p) => api.getBotLogs(p), { id: bot.id, timeStart, timeEnd, messageContains: 'recurring event "a"' })
    assert.ok(onlyA.logs.length > 0 && onlyA.logs.length < logs.length)
    assert.ok(onlyA.logs.every((l) => l.message.includes('recurring event "a"')))
    for (const hostile of ['"', '|', '\\', '.*', '[a-e]', '/', '" | limit 1 | "']) {
      const r = expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart, timeEnd, messageContains: 'x' + hostile }))
      assert.deepEqual(r.logs, [], `messageContains ${hostile}`)
    }
    assert.deepEqual(expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart, timeEnd, level: 'info' })).logs, [])
    assert.deepEqual(expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart: timeEnd })).logs, [])

    // Deleted, the issue is gone; its code's next failure would open a new one.
    expectValid('deleteBotIssue', await api.deleteBotIssue({ id: bot.id, issueId: issue.id }))
    await expectApiError(api.getBotIssue({ id: bot.id, issueId: issue.id }), 404, 'ResourceNotFound')
    await expectApiError(api.listBotIssueEvents({ id: bot.id, issueId: issue.id }), 404, 'ResourceNotFound')
    assert.deepEqual(expectValid('listBotIssues', await api.listBotIssues({ id: bot.id })).issues, [])
  })

  test('registrations are logged in the integration log and the bot log', async () => {
    const { api } = await newWorkspace()
    const integ = await receiver()
    const { integration } = validBot('createIntegration', await api.createIntegration({ name: unique('logged'), version: '1.0.0', url: integ.url }))
    const timeStart = minutesAgo(1)
    const { bot } = validBot('createBot', await api.createBot({}))
    validBot('updateBot', await api.updateBot({ id: bot.id, integrations: { main: { integrationId: integration.id, enabled: true, configuration: {} } } }))
    assert.equal(integ.calls, 1)

    const intLogs = expectValid('getIntegrationLogs', await api.getIntegrationLogs({ id: integration.id, timeStart }))
    assert.equal(intLogs.logs.length, 1)
    assert.match(intLogs.logs[0].message, new RegExp(`register for bot ${bot.id}`))
    assert.equal(intLogs.logs[0].level, 'info')
    const botLogs = expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart, messageContains: 'integration "main" register' }))
    assert.equal(botLogs.logs.length, 1)
    assert.deepEqual(expectValid('getIntegrationLogs', await api.getIntegrationLogs({ id: integration.id, timeStart, level: 'error' })).logs, [])
  })

  test('bad input is a 400; another workspace sees nothing (404)', async () => {
    const { ws, api } = await newWorkspace()
    const { bot } = validBot('createBot', await api.createBot({}))
    const { integration } = validBot('createIntegration', await api.createIntegration({ name: unique('quiet'), version: '1.0.0' }))
    const timeStart = minutesAgo(5)

    assert.deepEqual(expectValid('getBotLogs', await api.getBotLogs({ id: bot.id, timeStart })), { logs: [] })
    assert.deepEqual(expectValid('getIntegrationLogs', await api.getIntegrationLogs({ id: integration.id, timeStart })), { logs: [] })
    assert.deepEqual(expectValid('listBotIssues', await api.listBotIssues({ id: bot.id })), { issues: [], meta: {} })

    await expectApiError(api.getBotLogs({ id: bot.id }), 400, 'InvalidPayload')
    await expectApiError(api.getBotLogs({ id: bot.id, timeStart: 'yesterday' }), 400, 'InvalidPayload')
    await expectApiError(api.getBotLogs({ id: bot.id, timeStart, timeEnd: minutesAgo(10) }), 400, 'InvalidPayload')
    await expectApiError(api.getBotLogs({ id: bot.id, timeStart, level: 'loud' }), 400, 'InvalidPayload')
    await expectApiError(api.getBotLogs({ id: bot.id, timeStart, userId: 'u" | limit 1' }), 400, 'InvalidPayload')
    await expectApiError(api.getBotLogs({ id: bot.id, timeStart, nextToken: 'forged' }), 400, 'InvalidPayload')
    await expectApiError(api.getIntegrationLogs({ id: integration.id }), 400, 'InvalidPayload')
    await expectApiError(api.getBotIssue({ id: bot.id, issueId: 'iss_01HZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')
    await expectApiError(api.deleteBotIssue({ id: bot.id, issueId: 'nope' }), 404, 'ResourceNotFound')

    const { api: other } = await newWorkspace()
    await expectApiError(other.getBotLogs({ id: bot.id, timeStart }), 404, 'ResourceNotFound')
    await expectApiError(other.getIntegrationLogs({ id: integration.id, timeStart }), 404, 'ResourceNotFound')
    await expectApiError(other.listBotIssues({ id: bot.id }), 404, 'ResourceNotFound')
    await expectApiError(other.getBotIssue({ id: bot.id, issueId: 'iss_01HZZZZZZZZZZZZZZZZZZZZZZZ' }), 404, 'ResourceNotFound')

    // A viewer reads, and cannot delete an issue.
    const { token } = await newAccount(api, 'viewer')
    const viewer = client({ token, workspaceId: ws.id })
    expectValid('getBotLogs', await viewer.getBotLogs({ id: bot.id, timeStart }))
    expectValid('listBotIssues', await viewer.listBotIssues({ id: bot.id }))
    await expectApiError(viewer.deleteBotIssue({ id: bot.id, issueId: 'iss_01HZZZZZZZZZZZZZZZZZZZZZZZ' }), 403, 'Forbidden')
  })
})
