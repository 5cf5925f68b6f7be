// Persistence check of the local platform, driven by run.sh around restarts.
//
//   node persistence.mjs create STATE_FILE   write, then record what was written
//   node persistence.mjs verify STATE_FILE   check everything recorded is still there
//
// create makes a workspace and a bot the first time (state file absent), and
// one more bot in the same workspace each time after. When KILL_PID is set,
// create sends SIGKILL to that process the moment createBot is acknowledged,
// before anything else (run.sh uses it for the kill -9 check); otherwise it
// reads the bot back (getBot, listBots) before recording it.
//
// Needs API_URL and DATA_DIR like the tests. Every response is validated
// against the reference schema.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { client, unique } from './lib/env.mjs'
import { expectValid } from './lib/schema.mjs'

const [phase, stateFile] = process.argv.slice(2)
if (!['create', 'verify'].includes(phase) || !stateFile) {
  console.error('usage: node persistence.mjs create|verify STATE_FILE')
  process.exit(2)
}

function readState() {
  try {
    return JSON.parse(fs.readFileSync(stateFile, 'utf8'))
  } catch (e) {
    if (e.code === 'ENOENT') return null
    throw e
  }
}

function writeState(state) {
  fs.writeFileSync(stateFile + '.tmp', JSON.stringify(state, null, 2))
  fs.renameSync(stateFile + '.tmp', stateFile)
}

async function create() {
  const admin = client()
  let state = readState()
  if (!state) {
    const ws = expectValid('createWorkspace', await admin.createWorkspace({ name: unique('persist') }))
    state = { workspace: { id: ws.id, name: ws.name }, bots: [] }
    writeState(state)
    console.log(`persistence: created workspace ${ws.id}`)
  }
  const api = client({ workspaceId: state.workspace.id })
  const name = unique('persist-bot')
  const { bot } = expectValid('createBot', await api.createBot({ name, tags: { persisted: 'yes' } }))

  const killPid = Number(process.env.KILL_PID || 0)
  if (killPid) {
    // The write was acknowledged: kill the server before anything else.
    process.kill(killPid, 'SIGKILL')
    state.bots.push({ id: bot.id, name, createdAt: bot.createdAt })
    writeState(state)
    console.log(`persistence: created bot ${bot.id}, then sent SIGKILL to ${killPid}`)
    return
  }

  const got = expectValid('getBot', await api.getBot({ id: bot.id }))
  assert.equal(got.bot.name, name)
  const listed = await allBots(api)
  assert.ok(listed.some((b) => b.id === bot.id), 'the new bot is listed')
  state.bots.push({ id: bot.id, name, createdAt: bot.createdAt })
  writeState(state)
  console.log(`persistence: created bot ${bot.id}`)
}

async function allBots(api) {
  const out = []
  let nextToken
  do {
    const page = expectValid('listBots', await api.listBots({ nextToken, pageSize: 100 }))
    out.push(...page.bots)
    nextToken = page.meta.nextToken
  } while (nextToken)
  return out
}

async function verify() {
  const state = readState()
  assert.ok(state, `no state in ${stateFile}: run the create phase first`)
  const admin = client()
  const ws = expectValid('getWorkspace', await admin.getWorkspace({ id: state.workspace.id }))
  assert.equal(ws.name, state.workspace.name)
  assert.equal(ws.botCount, state.bots.length, 'botCount counts every bot created')
  // Every page: a backend kept across runs (moto) holds more than one.
  const workspaces = []
  let next
  do {
    const page = expectValid('listWorkspaces', await admin.listWorkspaces({ pageSize: 100, nextToken: next }))
    workspaces.push(...page.workspaces)
    next = page.meta.nextToken
  } while (next)
  assert.ok(workspaces.some((w) => w.id === ws.id), 'the workspace is listed')

  const api = client({ workspaceId: ws.id })
  for (const b of state.bots) {
    const { bot } = expectValid('getBot', await api.getBot({ id: b.id }))
    assert.equal(bot.name, b.name)
    assert.equal(bot.createdAt, b.createdAt)
    assert.deepEqual(bot.tags, { persisted: 'yes' })
  }
  const listed = await allBots(api)
  assert.deepEqual(new Set(listed.map((b) => b.id)), new Set(state.bots.map((b) => b.id)), 'listBots returns exactly the bots created')
  console.log(`persistence: workspace ${ws.id} and its ${state.bots.length} bot(s) are all there`)
}

try {
  await (phase === 'create' ? create() : verify())
} catch (e) {
  console.error(`persistence ${phase} failed: ${e.stack || e}`)
  process.exit(1)
}
