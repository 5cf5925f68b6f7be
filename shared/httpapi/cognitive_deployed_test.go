package httpapi_test

import (
	"strings"
	"testing"

	"github.com/botforge/platform/shared/llm/llmtest"
)

// thinkingBundle is a deployed bot's code (a CommonJS bundle as bp deploy
// sends it, Node's http only): on message_created it asks the cognitive
// API for a reply with its own BP_TOKEN (a bot API key) and x-bot-id, as
// @botpress/cognitive does in an SDK bot, and answers the user with the
// model's output.
const thinkingBundle = `'use strict'
const http = require('http')
function post(path, botId, body) {
  return new Promise((resolve, reject) => {
    const r = http.request(new URL(path, process.env.BP_API_URL), { method: 'POST', headers: {
      'content-type': 'application/json', authorization: 'Bearer ' + process.env.BP_TOKEN, 'x-bot-id': botId } }, (rr) => {
      let b = ''; rr.on('data', (c) => { b += c }); rr.on('end', () => rr.statusCode < 300 ? resolve(JSON.parse(b)) : reject(new Error(rr.statusCode + ' ' + b)))
    })
    r.on('error', reject)
    r.end(JSON.stringify(body))
  })
}
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    if (req.url === '/health') { res.end('ok'); return }
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', async () => {
      if (req.headers['x-bp-operation'] !== 'event_received' || req.headers['x-bp-type'] !== 'message_created') { res.end('{}'); return }
      const botId = req.headers['x-bot-id']
      const ev = JSON.parse(body).event
      try {
        const llm = await post('/v2/cognitive/generate-text', botId, { model: 'best', messages: [
          { role: 'system', content: 'You are a helpful bot.' }, { role: 'user', content: ev.payload.message.payload.text }] })
        await post('/v1/chat/messages', botId, { conversationId: ev.conversationId, userId: botId, type: 'text', tags: {},
          payload: { text: llm.output + ' [' + llm.metadata.model + ', ' + llm.metadata.usage.outputTokens + ' tokens]' } })
        res.end('{}')
      } catch (e) {
        console.error('thinking failed: ' + e.message)
        res.writeHead(500); res.end('{}')
      }
    })
  }).listen(port, '127.0.0.1')
} } }
`

// TestDeployedBotAnswersWithLLM: a bot deployed with code answers a user's
// message with an LLM reply through the runtime: the platform delivers the
// message to its worker, the bot calls the cognitive API with its own key,
// the provider gets the conversation, and the reply reaches the channel.
func TestDeployedBotAnswersWithLLM(t *testing.T) {
	needNode(t)
	up := llmtest.New("llama3")
	t.Cleanup(up.Close)
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	d := newDeployedFixture(t, thinkingBundle, nil)
	d.say("what is a platform?")
	d.waitReply(t, "echo: what is a platform? [openai:llama3, 5 tokens]")
	sent := up.Last()
	msgs, _ := sent.Body["messages"].([]any)
	if len(msgs) != 2 || sent.Body["model"] != "llama3" || !strings.Contains(sent.Path, "chat/completions") {
		t.Fatalf("the provider got %v", sent.Body)
	}
}
