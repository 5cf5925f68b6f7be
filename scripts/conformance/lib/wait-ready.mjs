// Waits until the local platform answers an authenticated request.
//
//   node lib/wait-ready.mjs API_URL DATA_DIR PID TIMEOUT_SECONDS
//
// Polls GET /v1/admin/account/me with the token of DATA_DIR/admin-token
// until it answers 200. Fails at once if process PID exits, and after
// TIMEOUT_SECONDS otherwise.
import fs from 'node:fs'
import path from 'node:path'

const [apiUrl, dataDir, pidArg, timeoutArg] = process.argv.slice(2)
const pid = Number(pidArg)
const deadline = Date.now() + Number(timeoutArg || 60) * 1000
let last = 'no answer yet'

function alive() {
  try {
    process.kill(pid, 0)
  } catch (e) {
    return e.code === 'EPERM'
  }
  // An exited child that its parent has not reaped yet still exists, as a
  // zombie (state Z in /proc/PID/stat where there is a /proc).
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return true
  }
}

while (Date.now() < deadline) {
  if (!alive()) {
    console.error(`the server (pid ${pid}) exited before it was ready (${last})`)
    process.exit(1)
  }
  let token = ''
  try {
    token = fs.readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim()
  } catch {
    last = 'admin-token not written yet'
  }
  if (token) {
    try {
      const res = await fetch(`${apiUrl}/v1/admin/account/me`, {
        headers: { authorization: `Bearer ${token}` },
        signal: AbortSignal.timeout(2000),
      })
      const body = await res.text()
      if (res.status === 200) process.exit(0)
      last = `GET /v1/admin/account/me answered ${res.status}: ${body.slice(0, 200)}`
    } catch (e) {
      last = `GET /v1/admin/account/me: ${e.cause?.code || e.message}`
    }
  }
  await new Promise((r) => setTimeout(r, 100))
}
console.error(`the server was not ready after ${timeoutArg || 60}s (${last})`)
process.exit(1)
