// e2e.mjs: what the browser end-to-end scripts (scripts/console/*.mjs,
// scripts/webchat/e2e.mjs, scripts/signin/e2e.mjs) share: a free loopback port, child processes
// started with their output in a log file (and killed at the end), and a
// wait for an HTTP endpoint to answer as expected.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// children are the processes start started; the caller kills them when done.
export const children = []

// freePort asks the kernel for a port nobody listens on (never a fixed one).
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address()
      s.close(() => resolve(port))
    })
  })
}

// start runs cmd with env added to this process's, its output appended to logFile.
export function start(cmd, args, env, logFile) {
  const out = fs.openSync(logFile, 'a')
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ['ignore', out, out] })
  children.push(child)
  return child
}

// waitHttp polls url (a string, or {url, init} for a request with options)
// until ok(response) holds, or fails after ms.
export async function waitHttp(url, ok, what, ms = 30000) {
  const deadline = Date.now() + ms
  for (;;) {
    try {
      const res = await fetch(url.url || url, url.init)
      if (ok(res)) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`${what} did not answer within ${ms} ms`)
    await sleep(100)
  }
}

// browserRun is the frame of one browser end-to-end script (the console's,
// its inbox's and health page's, sign-in's): steps that say how long they
// took and, when one fails, save the page's screenshot (failure.png in
// shots) and print its text; then, around the script's main, the set-up's
// own error, the children killed, the tails of the logs in work when
// something failed, one line of verdict and the exit code.
export function browserRun(name, { shots, work, logs = ['platform.log'] }) {
  const run = {
    failures: 0,
    page: null, // the page a failed step shows
    async step(title, fn) {
      const t0 = Date.now()
      try {
        await fn()
        console.log(`ok   ${title} (${Date.now() - t0} ms)`)
      } catch (e) {
        run.failures++
        console.log(`FAIL ${title}: ${e.stack || e}`)
        if (run.page) {
          await run.page.screenshot({ path: `${shots}/failure.png`, fullPage: true }).catch(() => {})
          console.log(`the page (${run.page.url()}; failure.png):\n` + (await run.page.evaluate(() => document.body.innerText).catch(() => '?')).slice(0, 1500))
        }
        throw e
      }
    },
    async main(main, cleanup = () => {}) {
      try {
        await main()
      } catch (e) {
        if (!run.failures) console.log(`FAIL set-up: ${e.stack || e}`) // a step reports its own
        run.failures = run.failures || 1
      } finally {
        for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
        cleanup()
      }
      if (run.failures) {
        for (const f of logs) {
          const log = `${work}/${f}`
          if (fs.existsSync(log)) console.log(`--- last lines of ${f} ---\n` + fs.readFileSync(log, 'utf8').split('\n').filter((l) => !/^SDK .* WARN /.test(l)).slice(-30).join('\n'))
        }
      }
      console.log(`${name}: ${run.failures ? 'FAILED' : 'passed'} (screenshots in ${shots})`)
      process.exit(run.failures ? 1 : 0)
    },
  }
  return run
}

// openBrowser launches headless Chromium (chrome: its path) or, with
// firefox, Firefox ESR over WebDriver BiDi (FIREFOX=/path overrides
// where), and opens one watched page: console errors (but those matching
// ignore), page errors and, when allowed lists origins, any request to
// another origin are pushed to problems, which the script checks at its
// end. puppeteer is the caller's own (its package's node_modules). The
// page is sized width x height: Firefox's window at launch (its BiDi
// lacks viewport emulation), Chromium's viewport unless viewport is false.
export async function openBrowser(puppeteer, run, { firefox, chrome, width = 1280, height = 900, viewport = true, extraPrefsFirefox, ignore, where = false, allowed }) {
  const browser = firefox
    ? await puppeteer.launch({ browser: 'firefox', executablePath: process.env.FIREFOX || '/usr/bin/firefox-esr', headless: true, args: [`--width=${width}`, `--height=${height}`], ...(extraPrefsFirefox ? { extraPrefsFirefox } : {}) })
    : await puppeteer.launch({ executablePath: chrome, headless: true, args: ['--no-sandbox', '--disable-dev-shm-usage', '--no-first-run', '--disable-gpu'] })
  console.log(`browser: ${await browser.version()}`)
  const problems = []
  const page = await browser.newPage()
  run.page = page
  if (!firefox && viewport) await page.setViewport({ width, height })
  page.on('console', (m) => {
    if (m.type() !== 'error' || (ignore && ignore.test(m.text()))) return
    problems.push(`console: ${m.text()}` + (where ? ` (${m.location()?.url || ''})` : ''))
  })
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`))
  if (allowed) {
    page.on('request', (r) => {
      const u = r.url()
      if (![...allowed, 'data:', 'blob:'].some((a) => u.startsWith(a))) problems.push(`external request: ${u}`)
    })
  }
  return { browser, page, problems }
}
