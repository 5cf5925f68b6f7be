// A fake OpenAI-compatible provider on loopback for the LLM end-to-end test
// (run.sh starts it before the platform): GET /v1/models and POST
// /v1/chat/completions, plain and streamed (SSE, usage last when asked with
// stream_options.include_usage). It records every chat request; the test
// reads them and steers the next answers through /_test/*:
//   GET  /_test/requests          the chat requests received, in order
//   POST /_test/next {fail?: [status...], reply?: string}
//                                 the next answers: failures first, then replies
// It prints its base URL (ending in /v1) on stdout once it listens.
import http from 'node:http'

const models = (process.env.FAKE_MODELS || 'llama-test,small-test').split(',')
const requests = []
let fail = []
let reply = null

const words = (s) => (s.match(/\S+/g) || []).length
const lastUser = (body) => {
  const m = [...(body.messages || [])].reverse().find((x) => x.role === 'user')
  if (!m) return ''
  return typeof m.content === 'string' ? m.content : (m.content || []).filter((p) => p.text).map((p) => p.text).join(' ')
}
const promptTokens = (body) => (body.messages || []).reduce((n, m) => n + 1 + (typeof m.content === 'string' ? words(m.content) : 0), 0)

function json(res, status, v) {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(v))
}

const server = http.createServer((req, res) => {
  let raw = ''
  req.on('data', (c) => (raw += c))
  req.on('end', () => {
    const body = raw ? JSON.parse(raw) : {}
    if (req.url === '/_test/requests') return json(res, 200, requests)
    if (req.url === '/_test/next') {
      fail = body.fail || []
      reply = body.reply ?? null
      return json(res, 200, {})
    }
    if (req.method === 'GET' && req.url === '/v1/models') {
      return json(res, 200, { object: 'list', data: models.map((id) => ({ id, object: 'model', owned_by: 'fake' })) })
    }
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return json(res, 404, { error: { message: `no route ${req.method} ${req.url}` } })
    }
    requests.push({ authorization: req.headers.authorization || '', body })
    if (fail.length) {
      const status = fail.shift()
      return json(res, status, { error: { message: `fake failure ${status}`, type: 'fake' } })
    }
    let text = reply ?? `echo: ${lastUser(body)}`
    if (body.response_format?.type === 'json_object' && reply === null) text = JSON.stringify({ echo: lastUser(body) })
    const usage = { prompt_tokens: promptTokens(body), completion_tokens: words(text) }
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
    if (!body.stream) {
      return json(res, 200, {
        id: 'chatcmpl-fake', object: 'chat.completion', model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }], usage,
      })
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const send = (v) => res.write(`data: ${JSON.stringify(v)}\n\n`)
    for (const piece of text.split(/(?<= )/)) {
      send({ id: 'chatcmpl-fake', model: body.model, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })
    }
    send({ id: 'chatcmpl-fake', model: body.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
    if (body.stream_options?.include_usage) send({ id: 'chatcmpl-fake', model: body.model, choices: [], usage })
    res.end('data: [DONE]\n\n')
  })
})

server.listen(0, '127.0.0.1', () => {
  console.log(`http://127.0.0.1:${server.address().port}/v1`)
})
