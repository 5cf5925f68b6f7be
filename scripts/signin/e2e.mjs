// e2e.mjs: people's sign-in end to end in a real browser (run by e2e.sh,
// which builds the platform and the OpenID provider and sets PLATFORM_BIN,
// OIDC_PROVIDER_BIN, WORK, SHOTS, CHROME, BROWSER). It starts the
// zitadel/oidc example provider and a fresh local platform configured
// with it, both on loopback, then in the browser: the first account's
// setup link linked to single sign-on ("Sign in with Zitadel example"),
// landing in the console, sign-out; sign-in again from the sign-in page;
// the provider's answer replayed and refused; a password set on the
// account page, a member invited with a link, TOTP turned on, a password +
// TOTP sign-in, the invitation accepted (once); sign-out.
import crypto from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { browserRun, openBrowser, children, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'

const HERE = path.dirname(fileURLToPath(import.meta.url))
// The console's browser driver (scripts/console/package.json).
const puppeteer = createRequire(path.join(HERE, '../console/package.json'))('puppeteer-core')
const { PLATFORM_BIN, OIDC_PROVIDER_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
// AWS_LOCAL=1 (make signin-e2e-aws): PLATFORM_BIN is ./functions/aws-local,
// the AWS build: single sign-on configured by the stack's parameters, the
// client secret an SSM SecureString, the callback ApiUrl/auth/oidc/callback
// answered by the admin function behind the HTTP API's stand-in.
const AWS_LOCAL = process.env.AWS_LOCAL === '1'
// Lambda cold starts on a shared machine: longer waits on aws-local.
const WAIT = AWS_LOCAL ? 60000 : 15000
const run = browserRun('signin-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log'] })
const step = run.step

// totp is RFC 6238's code of a base32 secret at time t (30 s, 6 digits,
// SHA-1), as an authenticator app computes it.
function totp(secret, t = Date.now()) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'
  let bits = ''
  for (const c of secret.replace(/=+$/, '').toUpperCase()) bits += alphabet.indexOf(c).toString(2).padStart(5, '0')
  const key = Buffer.from(bits.match(/.{8}/g).map((b) => parseInt(b, 2)))
  const msg = Buffer.alloc(8)
  msg.writeBigUInt64BE(BigInt(Math.floor(t / 1000 / 30)))
  const h = crypto.createHmac('sha1', key).update(msg).digest()
  const o = h[h.length - 1] & 0xf
  return String((h.readUInt32BE(o) & 0x7fffffff) % 1000000).padStart(6, '0')
}

async function main() {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const opPort = await freePort()
  const issuer = `http://127.0.0.1:${opPort}/`
  start(OIDC_PROVIDER_BIN, [], { PORT: String(opPort), REDIRECT_URI: `${api}/auth/oidc/callback` }, path.join(WORK, 'provider.log'))
  await waitHttp(issuer + '.well-known/openid-configuration', (r) => r.status === 200, 'the OpenID provider')
  const dataDir = path.join(WORK, 'data')
  if (AWS_LOCAL) {
    start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir,
      '--parameter', `OidcIssuer=${issuer}`, '--parameter', 'OidcClientId=web', '--parameter', 'OidcName=Zitadel example',
      '--secure-string', '/bot-platform/oidc-client-secret=secret'], {}, path.join(WORK, 'platform.log'))
  } else {
    start(PLATFORM_BIN, ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, '--oidc-issuer', issuer, '--oidc-client-id', 'web', '--oidc-name', 'Zitadel example'],
      // hitl: the inbox's stream, which the console opens in a workspace.
      { PLATFORM_OIDC_CLIENT_SECRET: 'secret', PLATFORM_BUILTINS: 'hitl' }, path.join(WORK, 'platform.log'))
  }
  // aws-local builds its functions first.
  const ready = AWS_LOCAL ? 600000 : 30000
  await waitHttp(api + '/', (r) => r.status === 200, 'the platform', ready)
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'setup-link')), 'the setup link', ready)
  const setupLink = fs.readFileSync(path.join(dataDir, 'setup-link'), 'utf8').trim()
  // On aws-local the inbox's stream is the stack's too, at its ChatStreamUrl
  // (the stream function's URL, another loopback origin).
  const streamOrigin = AWS_LOCAL
    ? new URL(JSON.parse(fs.readFileSync(path.join(dataDir, 'aws-local', 'outputs.json'), 'utf8')).ChatStreamUrl).origin
    : api
  console.log(`platform ${api}, provider ${issuer}, screenshots in ${SHOTS}`)

  // A 401 (no session yet) logs a failed resource load: expected.
  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, height: 860, viewport: false, ignore: /Failed to load resource/ })
  if (AWS_LOCAL) {
    page.setDefaultTimeout(WAIT)
    page.setDefaultNavigationTimeout(WAIT)
  }
  // Nothing leaves the machine: the platform (its stream host) and the provider only.
  const callbacks = []
  page.on('request', (r) => {
    const u = r.url()
    if (!u.startsWith(api) && !u.startsWith(issuer) && !u.startsWith(streamOrigin + '/') && !u.startsWith('data:')) problems.push(`external request: ${u}`)
    if (u.startsWith(api + '/auth/oidc/callback')) callbacks.push(u)
  })
  const shot = async (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  const texts = (sel) => page.$$eval(sel, (els) => els.map((e) => e.innerText)).catch(() => [])
  const waitText = async (sel, re, ms = WAIT) => {
    const deadline = Date.now() + ms
    for (;;) {
      const ts = await texts(sel)
      if (ts.some((t) => re.test(t))) return
      if (Date.now() > deadline) throw new Error(`no ${sel} matching ${re} within ${ms} ms (found: ${JSON.stringify(ts).slice(0, 300)})`)
      await sleep(50)
    }
  }
  const clickText = async (sel, re) => {
    await waitText(sel, re)
    for (const e of await page.$$(sel)) if (re.test(await e.evaluate((x) => x.innerText))) return e.click()
  }
  const type = async (sel, value) => {
    await page.waitForSelector(sel)
    await page.$eval(sel, (e) => (e.value = ''))
    await page.type(sel, value)
  }
  // The provider's own login page (the example's username form).
  const providerLogin = async () => {
    await page.waitForSelector('#username', { timeout: WAIT })
    if (!page.url().startsWith(issuer)) throw new Error(`not at the provider: ${page.url()}`)
    await type('#username', 'test-user@127.0.0.1')
    await type('#password', 'verysecure')
    await Promise.all([page.waitForNavigation({ waitUntil: 'load' }).catch(() => {}), page.click('button[type=submit], input[type=submit]')])
  }
  const signedIn = async () => {
    await waitText('header.top .who', /admin@localhost/)
    if (!page.url().startsWith(api + '/#/')) throw new Error(`landed at ${page.url()}`)
  }
  const signOut = async () => {
    await clickText('header.top button', /Sign out/)
    await page.waitForSelector('form[data-test=signin-password]')
  }

  await step('the setup link offers a password and "Sign in with Zitadel example"', async () => {
    await page.goto(setupLink, { waitUntil: 'load' })
    await waitText('[data-test=link-email]', /admin@localhost/)
    await waitText('a[data-test=sso]', /^Sign in with Zitadel example$/)
    await shot('01-setup-link')
  })
  await step('linking single sign-on at the provider lands in the console', async () => {
    await clickText('a[data-test=sso]', /Sign in with/)
    await providerLogin()
    await signedIn()
    await shot('02-console-after-sso')
  })
  await step('sign out: the session ends', async () => {
    await signOut()
    const r = await page.evaluate(async () => { const res = await fetch('/auth/session', { credentials: 'same-origin' }); return `${res.status} ${(await res.json()).signedIn}` })
    if (r !== '200 false') throw new Error(`session after sign-out: ${r}`)
    await waitText('a[data-test=sso]', /^Sign in with Zitadel example$/)
    await shot('03-signin-page')
  })
  await step('sign in from the sign-in page with the provider', async () => {
    callbacks.length = 0
    await clickText('a[data-test=sso]', /Sign in with/)
    await providerLogin()
    await signedIn()
  })
  await step('the provider\'s answer replayed is refused', async () => {
    if (!callbacks.length) throw new Error('no callback seen')
    await page.goto(callbacks[callbacks.length - 1], { waitUntil: 'load' })
    await waitText('[data-test=signin-failed]', /already finished|started no sign-in/)
    await shot('04-replay-refused')
    await page.goto(api + '/#/', { waitUntil: 'load' })
    await signedIn() // the session opened before stays
  })
  await step('set a password on the account page (every session ends)', async () => {
    await page.goto(api + '/#/account', { waitUntil: 'load' })
    await page.waitForSelector('form[data-test=change-password]')
    await type('form[data-test=change-password] input[autocomplete=new-password]', 'a long passphrase 1')
    await page.click('form[data-test=change-password] button')
    await waitText('[data-test=error]', /every session ended/)
  })
  await step('sign in with email and password', async () => {
    await type('#email', 'admin@localhost')
    await type('#password', 'a long passphrase 1')
    await page.click('form[data-test=signin-password] button')
    await signedIn()
  })
  let inviteUrl, ws
  await step('invite a member (a viewer): the link to copy, the invitation pending', async () => {
    const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
    ws = await (await fetch(api + '/v1/admin/workspaces', { method: 'POST', headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Sign-in team' }) })).json()
    await page.goto(`${api}/#/w/${ws.id}/members`, { waitUntil: 'load' })
    // The owner's nav offers "New assistant".
    await waitText('header.top nav a', /New assistant/)
    await type('form[data-test=invite-link] input', 'dev@example.com')
    await page.select('form[data-test=invite-link] select', 'viewer')
    await page.click('form[data-test=invite-link] button')
    await waitText('[data-test=invitation-link]', /\/#\/invite\//)
    inviteUrl = (await page.$eval('[data-test=invitation-link] code', (e) => e.innerText)).trim()
    await waitText('table[data-test=invitations]', /dev@example\.com/)
    // The members table above lists the invited member without a reload.
    await waitText('table[data-test=members]', /dev@example\.com/)
    await shot('05-members-invitation')
  })
  let secret
  await step('turn on TOTP: recovery codes shown', async () => {
    await page.goto(api + '/#/account', { waitUntil: 'load' })
    await page.waitForSelector('[data-test=totp-start]')
    await page.click('[data-test=totp-start]')
    await page.waitForSelector('[data-test=totp-secret]')
    secret = (await page.$eval('[data-test=totp-secret]', (e) => e.innerText)).trim()
    await type('#totp-code', totp(secret))
    await page.click('form[data-test=totp-enable] button')
    await waitText('[data-test=recovery-codes]', /Recovery codes/)
    await waitText('[data-test=totp-on]', /On/)
    await shot('06-account-totp')
  })
  await step('sign out, then password + TOTP sign-in', async () => {
    await signOut()
    await type('#email', 'admin@localhost')
    await type('#password', 'a long passphrase 1')
    await page.click('form[data-test=signin-password] button')
    await page.waitForSelector('#code')
    // The code enrolled is spent: the next step's (accepted for drift).
    await type('#code', totp(secret, Date.now() + 30000))
    await page.click('form[data-test=signin-password] button')
    await signedIn()
    await shot('06-console-after-totp')
    await signOut()
  })
  await step('the invitation accepted once: a password, then the console', async () => {
    await page.goto(inviteUrl, { waitUntil: 'load' })
    await waitText('[data-test=link-email]', /dev@example\.com/)
    await waitText('main.signin', /Sign-in team/)
    await type('#new-password', 'dev passphrase 1')
    await page.click('form[data-test=accept-link] button')
    await waitText('header.top .who', /dev@example\.com/)
    await shot('07-invitation-accepted')
    // A viewer's nav has no "New assistant" (it cannot create a bot):
    // checked once its role is known (the Bots page says why it cannot).
    await page.goto(`${api}/#/w/${ws.id}`, { waitUntil: 'load' })
    await waitText('[data-test=refused]', /viewer: creating bots needs developer/)
    await waitText('header.top nav a', /Members/)
    if ((await texts('header.top nav a')).some((t) => /New assistant/.test(t))) throw new Error('a viewer\'s nav shows "New assistant"')
    await signOut()
    await page.goto(inviteUrl, { waitUntil: 'load' })
    await waitText('[data-test=error]', /expired or was already used/)
  })
  await step('no console error, no external request', async () => {
    if (problems.length) throw new Error(problems.join('\n'))
  })
  await browser.close()
}

await run.main(main)
