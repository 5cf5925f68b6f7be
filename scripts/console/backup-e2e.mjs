// backup-e2e.mjs: the console's Backups page (shared/console/static/backups.js)
// end to end in headless Chromium, then Firefox (run by scripts/backup/e2e.sh,
// which builds the platform and sets PLATFORM_BIN, WORK, SHOTS, CHROME). A
// fresh local platform with a schedule and retention; a workspace written
// before the backup and one after; in the browser: the page shows the
// settings and no backup, "Back up now" lists a backup with its size, the
// restore button (confirmed) stages the restore and says it happens at the
// next start; the platform is stopped and started again: the backup is
// restored (the workspace written after it is gone, the one before is
// there) and the page no longer shows a pending restore. Under the
// console's CSP, with no console error. Screenshots go to SHOTS.
import fs from 'node:fs'
import path from 'node:path'
import { browserRun, openBrowser, freePort, sleep, start, waitHttp } from '../lib/e2e.mjs'
import puppeteer from 'puppeteer-core'

const { PLATFORM_BIN, WORK, SHOTS, CHROME } = process.env
const FIREFOX = process.env.BROWSER === 'firefox'
const run = browserRun('backup-e2e', { shots: SHOTS, work: WORK, logs: ['platform.log'] })
const step = run.step

async function main() {
  const port = await freePort()
  const api = `http://127.0.0.1:${port}`
  const dataDir = path.join(WORK, 'data')
  const backupDir = path.join(WORK, 'backups')
  const args = ['--addr', `127.0.0.1:${port}`, '--data-dir', dataDir, '--backup-dir', backupDir, '--backup-every', '24h', '--backup-keep', '3']
  const serve = async () => {
    const child = start(PLATFORM_BIN, args, {}, path.join(WORK, 'platform.log'))
    await waitHttp(api + '/', (r) => r.status === 200, 'the platform')
    return child
  }
  let platform = await serve()
  await waitHttp(api + '/', () => fs.existsSync(path.join(dataDir, 'admin-token')), 'the admin token')
  const token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  const call = async (method, p, body, headers = {}) => {
    const r = await fetch(api + p, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body: body && JSON.stringify(body) })
    const j = await r.json()
    if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(j)}`)
    return j
  }
  const workspaces = async () => (await call('GET', '/v1/admin/workspaces')).workspaces.map((w) => w.name)
  await call('POST', '/v1/admin/workspaces', { name: 'before-backup' })

  const { browser, page, problems } = await openBrowser(puppeteer, run, { firefox: FIREFOX, chrome: CHROME, allowed: [api] })
  const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true })
  // Polled from here (page.waitForFunction builds a function in the page,
  // which the CSP refuses under Firefox's BiDi).
  const waitFor = async (fn, what, ms = 30000) => {
    const deadline = Date.now() + ms
    for (;;) {
      const v = await fn().catch(() => null)
      if (v) return v
      if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`)
      await sleep(100)
    }
  }
  const rows = () => page.$$eval('[data-test=backup]', (rs) => rs.map((r) => ({ name: r.dataset.name, size: Number(r.dataset.size), text: r.querySelector('[data-test=size]').innerText })))
  const text = (sel) => page.$eval(sel, (e) => e.innerText)
  const signIn = async () => {
    await page.goto(api + '/', { waitUntil: 'load' })
    await page.waitForSelector('#token')
    await page.type('#token', token)
    await page.click('form[data-test=signin] button')
    await page.waitForSelector('header.top')
  }

  await step('sign in and open the Backups page: the settings, no backup yet', async () => {
    await signIn()
    await page.click('header.top a[href="#/backups"]')
    const settings = await waitFor(() => text('[data-test=backup-settings]'), 'the settings line')
    if (!settings.includes(backupDir) || !settings.includes('every 24h0m0s') || !settings.includes('newest 3')) throw new Error(`settings: ${settings}`)
    await waitFor(() => text('[data-test=empty]'), 'the empty list')
    await shot('01-no-backup')
  })
  let name
  await step('"Back up now" lists the backup with its size', async () => {
    await page.click('[data-test=backup-now]')
    const rs = await waitFor(async () => { const r = await rows(); return r.length === 1 && r }, 'one backup listed')
    name = rs[0].name
    if (!(rs[0].size > 0) || !/^[0-9.]+ (KiB|MiB)$/.test(rs[0].text)) throw new Error(`row: ${JSON.stringify(rs[0])}`)
    const taken = await text('[data-test=backup-taken]')
    if (!taken.includes(name)) throw new Error(`notice: ${taken}`)
    const listed = (await call('GET', '/v1/admin/backups')).backups
    if (listed.length !== 1 || listed[0].name !== name || listed[0].size !== rs[0].size) throw new Error(`the API lists ${JSON.stringify(listed)}`)
    console.log(`     ${name}: ${rs[0].text}`)
    await shot('02-backup-listed')
  })
  await call('POST', '/v1/admin/workspaces', { name: 'after-backup' })
  await step('the restore button, confirmed, stages the restore for the next start', async () => {
    await page.click(`[data-test=backup][data-name="${name}"] [data-test=restore]`)
    await waitFor(() => text('[data-test=confirm-restore]'), 'the confirmation')
    await shot('03-confirm')
    await page.click('[data-test=confirm-restore] [data-test=confirm]')
    const notice = await waitFor(() => text('[data-test=pending-restore]'), 'the pending restore notice')
    if (!notice.includes(name) || !notice.includes('next starts')) throw new Error(`notice: ${notice}`)
    if ((await call('GET', '/v1/admin/backups')).pendingRestore !== name) throw new Error('the API does not say the restore is pending')
    // Nothing changes before the restart.
    const names = await workspaces()
    if (!names.includes('after-backup')) throw new Error(`workspaces before the restart: ${names}`)
    await shot('04-restore-pending')
  })
  await step('stopped and started again, the platform has restored the backup', async () => {
    platform.kill('SIGINT')
    await new Promise((r) => (platform.exitCode !== null ? r() : platform.once('exit', r)))
    platform = await serve()
    const names = await workspaces()
    if (!names.includes('before-backup') || names.includes('after-backup')) throw new Error(`workspaces after the restore: ${names}`)
    // The tab's session (the pasted token) survives the restart: the
    // restored store holds the same account and token.
    await page.goto(api + '/#/backups', { waitUntil: 'load' })
    await page.reload({ waitUntil: 'load' })
    const rs = await waitFor(async () => { const r = await rows(); return r.length === 1 && r }, 'the backup still listed')
    if (rs[0].name !== name) throw new Error(`listed ${JSON.stringify(rs)}`)
    if (await page.$('[data-test=pending-restore]')) throw new Error('a restore is still pending')
    const kept = fs.readdirSync(dataDir).filter((n) => n.startsWith('.before-restore-'))
    if (kept.length !== 1) throw new Error(`the replaced state is not kept aside: ${kept}`)
    await shot('05-restored')
  })
  await browser.close()
  if (problems.length) {
    run.failures++
    console.log('FAIL browser problems:\n  ' + problems.join('\n  '))
  }
}

await run.main(main)
