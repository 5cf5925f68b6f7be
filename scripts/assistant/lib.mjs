// lib.mjs: what the assistant's end-to-end tests share: a fake
// OpenAI-compatible provider on loopback that records what it is sent,
// the test documents (a PDF holding the answer, a Markdown file about
// something else), and `assistant create` of the platform's binary.
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'

// The question's answer is only in refunds.pdf; shipping.md is unrelated.
export const ANSWER_PASSAGE = 'Customers of Zorblax Corp may ask for a refund within 37 days of delivery, with the receipt.'
export const UNRELATED = 'Parcels leave the Zorblax warehouse every Tuesday by boat.'
export const INSTRUCTIONS = "You are Zorblax's support assistant. Answer briefly."

// fakeProvider answers GET /v1/models and POST /v1/chat/completions with
// reply(body) (default: the refund answer when the system message holds
// the passage), recording each chat request.
export function fakeProvider(model = 'zorblax-small') {
  const requests = []
  let reply = (body) => {
    const system = body.messages.find((m) => m.role === 'system')?.content || ''
    const last = body.messages[body.messages.length - 1].content
    if (/receipt/i.test(last)) return 'Yes: bring the receipt with you.'
    return system.includes('37 days') ? 'You have 37 days after delivery to ask for a refund.' : 'CANNOT_ANSWER'
  }
  const server = http.createServer((req, res) => {
    let raw = ''
    req.on('data', (c) => (raw += c))
    req.on('end', () => {
      const send = (status, v) => {
        res.writeHead(status, { 'content-type': 'application/json' })
        res.end(JSON.stringify(v))
      }
      if (req.method === 'GET' && req.url === '/v1/models') return send(200, { object: 'list', data: [{ id: model, object: 'model', owned_by: 'fake' }] })
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return send(404, { error: { message: `no route ${req.url}` } })
      const body = JSON.parse(raw)
      requests.push(body)
      const text = reply(body)
      send(200, {
        id: 'chatcmpl-fake', object: 'chat.completion', model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 },
      })
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({
    url: `http://127.0.0.1:${server.address().port}/v1`,
    model,
    requests,
    close: () => server.close(),
  })))
}

// samplePDF writes a small PDF as word processors do (Helvetica,
// WinAnsiEncoding), a text object per paragraph (shared/files/pdf_test.go's).
export function samplePDF(paras) {
  let c = ''
  paras.forEach((p, j) => {
    c += `BT /F1 12 Tf 72 ${720 - 20 * j} Td T* (${p.replace(/[\\()]/g, (m) => '\\' + m)}) Tj ET\n`
  })
  const objs = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [4 0 R] /Count 1 >>',
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 3 0 R >> >> >>',
    `<< /Length ${Buffer.byteLength(c)} >>\nstream\n${c}endstream`,
  ]
  let out = '%PDF-1.4\n'
  const offs = objs.map((o, i) => {
    const at = Buffer.byteLength(out)
    out += `${i + 1} 0 obj\n${o}\nendobj\n`
    return at
  })
  const x = Buffer.byteLength(out)
  out += `xref\n0 ${objs.length + 1}\n0000000000 65535 f \n` + offs.map((o) => `${String(o).padStart(10, '0')} 00000 n \n`).join('')
  out += `trailer\n<< /Size ${objs.length + 1} /Root 1 0 R >>\nstartxref\n${x}\n%%EOF\n`
  return Buffer.from(out, 'latin1')
}

// writeDocuments writes the two documents into dir and returns their paths.
export function writeDocuments(dir) {
  const pdf = path.join(dir, 'refunds.pdf')
  fs.writeFileSync(pdf, samplePDF(['Refunds', ANSWER_PASSAGE]))
  const md = path.join(dir, 'shipping.md')
  fs.writeFileSync(md, `# Shipping\n\n${UNRELATED}\n`)
  return [pdf, md]
}

// assistantCreate runs `<bin> assistant create ...` and returns {botId, webchat}.
export function assistantCreate(bin, args, env = {}) {
  return new Promise((resolve, reject) => {
    execFile(bin, ['assistant', 'create', ...args], { env: { ...process.env, ...env }, timeout: 600000 }, (err, stdout, stderr) => {
      if (err) return reject(new Error(`assistant create: ${err.message}\n${stderr}`))
      const botId = (stdout.match(/^bot: (\S+)$/m) || [])[1]
      const webchat = (stdout.match(/^webchat: (\S+)$/m) || [])[1]
      if (!botId || !webchat) return reject(new Error(`assistant create printed ${JSON.stringify(stdout)} (stderr ${stderr})`))
      resolve({ botId, webchat, stderr })
    })
  })
}

// checkRequest asserts what the provider received for the question: the
// instructions and the answer's passage, not the unrelated document.
export function checkRequest(body, question) {
  const system = body.messages.find((m) => m.role === 'system')?.content || ''
  if (!system.startsWith(INSTRUCTIONS)) throw new Error(`the provider's system message lacks the instructions: ${system.slice(0, 300)}`)
  if (!system.includes(ANSWER_PASSAGE)) throw new Error(`the provider did not get the passage holding the answer: ${system}`)
  if (system.includes(UNRELATED)) throw new Error(`the provider got the unrelated document: ${system}`)
  const last = body.messages[body.messages.length - 1]
  if (last.role !== 'user' || last.content !== question) throw new Error(`the provider's last message: ${JSON.stringify(last)}`)
}
