// The README's client example, run as the README says: saved as
// example.js in a directory of its own (outside the repository) where
// @botpress/client is installed, run from yet another directory with
// BP_TOKEN (and BP_API_URL) set. It must succeed and print what the README
// shows it prints (ids aside).
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { adminToken, apiUrl } from '../lib/env.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
const readme = fs.readFileSync(path.join(here, '../../../README.md'), 'utf8')

/** block returns the fenced block of lang that follows marker. */
function block(marker, lang) {
  const at = readme.indexOf(marker)
  assert.ok(at >= 0, `README: ${JSON.stringify(marker)} not found`)
  const m = readme.slice(at).match(new RegExp('```' + lang + '\\n([\\s\\S]*?)```'))
  assert.ok(m, `README: no ${lang} block after ${JSON.stringify(marker)}`)
  return m[1]
}

test('the README example runs from anywhere and prints what the README shows', () => {
  const code = block('node example.js', 'js')
  const shown = block('It prints', '').trim().split('\n')

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-example-'))
  const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-elsewhere-'))
  try {
    fs.writeFileSync(path.join(dir, 'example.js'), code)
    // What `npm install @botpress/client` in that directory gives.
    fs.symlinkSync(path.join(here, '../node_modules'), path.join(dir, 'node_modules'), 'dir')
    const out = execFileSync(process.execPath, [path.join(dir, 'example.js')], {
      cwd: elsewhere,
      env: { PATH: process.env.PATH, BP_TOKEN: adminToken(), BP_API_URL: apiUrl },
      encoding: 'utf8',
      timeout: 60000,
    })
    const got = out.trim().split('\n')
    const idless = (l) => l.replace(/\b[a-z]+_[0-9A-Z]{26}\b/g, '<id>')
    assert.deepEqual(got.map(idless), shown.map(idless))
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
    fs.rmSync(elsewhere, { recursive: true, force: true })
  }
})
