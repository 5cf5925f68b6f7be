// Round-trip latency with the REAL official SDK (@botpress/sdk 7.2.4): a
// provider's webhook call reaches the integration (fixtures/integration.js),
// whose handler writes the user's message (initializeIncomingMessage); the
// platform delivers it to the bot (fixtures/bot.js), whose reply
// (createMessage) the platform delivers to the integration's channel.
// One round trip is the webhook POST sent until the integration's channel
// handler has the reply. Prints p50 and p99 of ROUND_TRIPS (default 50),
// one at a time, after 5 unmeasured ones. Timing on a shared machine is
// not asserted unless LATENCY_MAX_P50_MS / LATENCY_MAX_P99_MS are set.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { newWorkspace } from '../lib/env.mjs'
import { setupRuntime } from '../lib/runtime.mjs'

describe('webhook -> bot -> reply round trip with @botpress/sdk 7.2.4', () => {
  let rt

  before(async () => {
    const { api } = await newWorkspace()
    rt = await setupRuntime(api)
  })
  after(async () => {
    await rt?.stop()
  })

  test('p50 and p99 of sequential round trips', async () => {
    const n = Number(process.env.ROUND_TRIPS ?? 50)
    const took = []
    for (let i = -5; i < n; i++) {
      const text = `lat-${i}-${Math.random().toString(36).slice(2)}`
      const start = performance.now()
      const res = await fetch(`${rt.install.webhookUrl}/incoming`, {
        method: 'POST',
        body: JSON.stringify({ from: 'lat-user', chat: 'lat-chat', id: text, name: 'Lat', text }),
      })
      assert.equal(res.status, 200)
      await res.arrayBuffer()
      await rt.integrationFixture.waitFor((c) => c.op === 'message_created' && c.payload.text === `echo: ${text}`)
      if (i >= 0) took.push(performance.now() - start)
    }
    took.sort((a, b) => a - b)
    const q = (p) => took[Math.min(took.length - 1, Math.floor(p * took.length))]
    console.log(`round trip webhook -> bot -> reply, ${n} sequential: p50 ${q(0.5).toFixed(1)} ms, p99 ${q(0.99).toFixed(1)} ms, max ${took.at(-1).toFixed(1)} ms`)
    if (process.env.LATENCY_MAX_P50_MS) assert.ok(q(0.5) <= Number(process.env.LATENCY_MAX_P50_MS), `p50 ${q(0.5)} ms`)
    if (process.env.LATENCY_MAX_P99_MS) assert.ok(q(0.99) <= Number(process.env.LATENCY_MAX_P99_MS), `p99 ${q(0.99)} ms`)
  })
})
