// Shared set-up of the conformance tests: where the API is, the tokens of
// the local platform's accounts, clients, and error assertions.
//
// API_URL   base URL of the platform (e.g. http://127.0.0.1:8080)
// DATA_DIR  the platform's --data-dir: admin-token holds the first account's
//           personal access token, account-tokens/<email> the first token
//           of each invited account.
import assert from 'node:assert/strict'
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { execFileSync } from 'node:child_process'
import * as bp from '@botpress/client'
import { expectValid } from './schema.mjs'

export const { Client, isApiError } = bp

function required(name) {
  const v = process.env[name]
  if (!v) throw new Error(`set ${name} (run the suite with scripts/conformance/run.sh)`)
  return v
}

// The official client falls back to these when a prop is missing: a token
// from the environment would defeat the "no token" tests.
for (const k of ['BP_TOKEN', 'BP_API_URL', 'BP_WORKSPACE_ID', 'BP_BOT_ID', 'BP_INTEGRATION_ID']) delete process.env[k]

export const apiUrl = required('API_URL').replace(/\/+$/, '')
export const dataDir = required('DATA_DIR')

/** The personal access token of the platform's first account. */
export function adminToken() {
  return fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
}

/** client makes an official client; workspaceId sets x-workspace-id. */
export function client({ token = adminToken(), workspaceId } = {}) {
  return new Client({ apiUrl, token, workspaceId })
}

/** A client sending no token at all. */
export function anonymousClient(workspaceId) {
  return new Client({ apiUrl, workspaceId })
}

/** unique returns a name no other test (or run) uses. */
export function unique(prefix) {
  return `${prefix}-${crypto.randomBytes(5).toString('hex')}`
}

/** uniqueEmail returns a fresh, lower-case address. */
export function uniqueEmail(prefix = 'user') {
  return `${unique(prefix)}@conformance.test`
}

/** invitedToken reads the first token of an account created by an invitation. */
export async function invitedToken(email) {
  // The AWS build sends no invitation: the operator issues the token
  // (scripts/issue-token with the stack's operator.env; make conformance-aws).
  if (process.env.ISSUE_TOKEN_BIN) return operatorToken(email)
  const file = path.join(dataDir, 'account-tokens', email.toLowerCase())
  // The invitation is written before createWorkspaceMember answers; allow for
  // a slow file system anyway.
  for (let i = 0; ; i++) {
    try {
      return fs.readFileSync(file, 'utf8').trim()
    } catch (e) {
      if (e.code !== 'ENOENT' || i >= 20) throw new Error(`no invitation token in ${file}: ${e.message}`)
      await new Promise((r) => setTimeout(r, 50))
    }
  }
}

/**
 * expectApiError asserts that promise rejects with the official client's
 * typed API error of the given HTTP status and, when given, error type
 * (e.g. 'Unauthorized', which the client maps to UnauthorizedError).
 * It returns the error.
 */
export async function expectApiError(promise, code, type) {
  let err
  await assert.rejects(promise, (e) => {
    err = e
    return true
  })
  assert.ok(
    isApiError(err),
    `expected a @botpress/client API error (status ${code}${type ? ' ' + type : ''}), got ${err?.constructor?.name}: ${err?.message}`,
  )
  const what = `${err.code} ${err.type}: ${err.message}`
  assert.equal(err.code, code, `expected status ${code}, got ${what}`)
  if (type) {
    assert.equal(err.type, type, `expected error type ${type}, got ${what}`)
    const cls = bp[`${type}Error`]
    assert.ok(cls, `the client has no ${type}Error class`)
    assert.ok(err instanceof cls, `expected an instance of ${type}Error, got ${err.constructor.name}`)
  }
  assert.equal(typeof err.id, 'string', `the error has no id: ${what}`)
  assert.ok(err.message, 'the error has no message')
  return err
}

/**
 * newWorkspace creates a workspace owned by the account of token and
 * returns it with a client bound to it (x-workspace-id).
 */
export async function newWorkspace(token = adminToken(), name = unique('ws')) {
  const ws = expectValid('createWorkspace', await client({ token }).createWorkspace({ name }))
  return { ws, api: client({ token, workspaceId: ws.id }) }
}

/**
 * subMinuteSchedules is false against the AWS build (make conformance-aws):
 * EventBridge Scheduler fires at most once a minute, so tests watching
 * recurring events fire every second skip there with this reason.
 */
export const subMinuteSchedules = process.env.PLATFORM_PKG?.includes('aws-local')
  ? 'the AWS build fires recurring events at most once a minute (EventBridge Scheduler)'
  : false

/**
 * streamApiUrl is the apiUrl of @botpress/chat for clients that listen to
 * the installation of webhookUrl. Locally, webhookUrl itself. Against the
 * AWS build (make conformance-aws) the streams are served by the streaming
 * function's URL: <ChatStreamUrl>webhooks/<webhookId>, ChatStreamUrl being
 * the stack output that make aws-local writes to
 * <data-dir>/aws-local/outputs.json (docs/chat-api.md "Where it runs").
 */
export function streamApiUrl(webhookUrl) {
  if (!process.env.PLATFORM_PKG?.includes('aws-local')) return webhookUrl
  const outputs = JSON.parse(fs.readFileSync(path.join(dataDir, 'aws-local', 'outputs.json'), 'utf8'))
  const base = outputs.ChatStreamUrl
  if (!base?.endsWith('/')) throw new Error(`no ChatStreamUrl ending with '/' in outputs.json: ${JSON.stringify(outputs)}`)
  const id = new URL(webhookUrl).pathname.split('/').filter(Boolean).at(-1)
  return `${base}webhooks/${id}`
}

/** operatorToken issues a token to an account as the operator does on AWS. */
function operatorToken(email) {
  const env = { PATH: process.env.PATH, HOME: process.env.HOME }
  for (const line of fs.readFileSync(path.join(dataDir, 'aws-local', 'operator.env'), 'utf8').split('\n')) {
    const i = line.indexOf('=')
    if (i > 0) env[line.slice(0, i)] = line.slice(i + 1)
  }
  return execFileSync(process.env.ISSUE_TOKEN_BIN, ['--email', email, '--note', 'conformance'], { env, encoding: 'utf8' }).trim()
}

/**
 * newAccount invites a fresh account into workspace (through api, a client
 * bound to it) with role, and returns the member, its token and email.
 */
export async function newAccount(api, role, prefix = role) {
  const email = uniqueEmail(prefix)
  const member = expectValid('createWorkspaceMember', await api.createWorkspaceMember({ email, role }))
  return { member, email, token: await invitedToken(email) }
}
