// emulator.js: talk to a bot as a user, on the platform's built-in channel
// (integration alias "emulator", docs/console.md). The user's messages are
// written with the developer's token plus x-bot-id and
// x-integration-alias: emulator, so they are incoming and reach the bot
// through the runtime as message_created; the bot's replies are stored
// and read back by polling listMessages every second, with each turn's
// events (listEvents of the conversation): their status and failure reason,
// and the bot's LLM calls of each turn (listBotLlmCalls: model, tokens,
// latency; docs/llm-calls.md). Under an assistant's answer (assistant.js),
// the passages it retrieved for it.
import { call, all } from './api.js'
import { html, useState, useEffect, useRef, ErrorBox, Empty, Status, fmtTime } from './ui.js'
import { turns as assistantTurns, Turn } from './assistant.js'
import { useRole, Refused } from './role.js'

const ALIAS = 'emulator'
const POLL_MS = 1000

const key = (bot) => `botforge.console.emulator.${bot}`

export function payloadText(m) {
  const p = m.payload || {}
  if (typeof p.text === 'string') return p.text
  return JSON.stringify(p)
}

export function Emulator({ ws, bot }) {
  const [conv, setConv] = useState(() => JSON.parse(sessionStorage.getItem(key(bot)) || 'null'))
  const [messages, setMessages] = useState([])
  const [events, setEvents] = useState([])
  const [llmCalls, setLLMCalls] = useState([])
  const [turns, setTurns] = useState(new Map())
  const [text, setText] = useState('')
  const [error, setError] = useState(null)
  const [busy, setBusy] = useState(false)
  const scroller = useRef(null)
  const opts = { bot, alias: ALIAS }
  const r = useRole(ws)
  const off = !r.may('talking to the bot in the emulator')

  const start = async () => {
    setBusy(true)
    setError(null)
    try {
      const { user } = await call('POST', '/v1/chat/users', { ...opts, body: { name: 'Console user', tags: {} } })
      const { conversation } = await call('POST', '/v1/chat/conversations', { ...opts, body: { channel: 'channel', tags: {} } })
      const c = { id: conversation.id, userId: user.id, since: conversation.createdAt }
      sessionStorage.setItem(key(bot), JSON.stringify(c))
      setMessages([])
      setEvents([])
      setLLMCalls([])
      setTurns(new Map())
      setConv(c)
      return c
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }

  // Poll while the emulator is open (and the tab visible).
  useEffect(() => {
    if (!conv) return
    let stop = false
    let timer
    const tick = async () => {
      if (!document.hidden) {
        try {
          const [ms, evs, lc] = await Promise.all([
            all('GET', '/v1/chat/messages', 'messages', { bot, query: { conversationId: conv.id } }, 500),
            all('GET', '/v1/chat/events', 'events', { bot, query: { conversationId: conv.id } }, 500),
            // The bot's LLM calls since the conversation began: those
            // naming it, and those naming none (placed by time).
            call('GET', `/v1/admin/bots/${bot}/llm-calls`, { ws, query: { limit: 100, ...(conv.since ? { since: conv.since } : {}) } })
              .then((r) => r.calls.filter((c) => !c.conversationId || c.conversationId === conv.id), () => []),
          ])
          // An assistant's turns (its replies are tagged `assistant`).
          const ts = ms.some((m) => m.tags?.assistant) ? await assistantTurns(ws, bot, conv).catch(() => null) : null
          if (stop) return
          if (ts) setTurns(ts)
          setLLMCalls(lc.reverse())
          ms.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
          evs.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
          setMessages(ms)
          setEvents(evs)
          setError(null)
        } catch (e) {
          if (stop) return
          if (e.status === 404) {
            sessionStorage.removeItem(key(bot))
            setConv(null)
            return
          }
          setError(e)
        }
      }
      if (!stop) timer = setTimeout(tick, POLL_MS)
    }
    tick()
    return () => { stop = true; clearTimeout(timer) }
  }, [conv?.id])

  useEffect(() => {
    const el = scroller.current
    if (el) el.scrollTop = el.scrollHeight
  }, [messages.length])

  const send = async (e) => {
    e.preventDefault()
    const t = text.trim()
    if (!t) return
    setBusy(true)
    setError(null)
    try {
      const c = conv || (await start())
      if (!c) return
      const { message } = await call('POST', '/v1/chat/messages', {
        ...opts,
        body: { conversationId: c.id, userId: c.userId, type: 'text', payload: { text: t }, tags: {} },
      })
      setText('')
      setMessages((ms) => (ms.some((m) => m.id === message.id) ? ms : [...ms, message]))
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }

  const eventOf = (m) => events.find((ev) => ev.messageId === m.id)
  // A turn's LLM calls: those made from the user's message to the next.
  const incoming = messages.filter((m) => m.direction === 'incoming')
  const callsOf = (m) => {
    const next = incoming[incoming.indexOf(m) + 1]
    return llmCalls.filter((c) => c.createdAt >= m.createdAt && (!next || c.createdAt < next.createdAt))
  }
  // An assistant's answer names the user's message it answers: the turn's
  // LLM calls go under the answer, with the passages it retrieved.
  const askedBy = (m) => (m.direction === 'outgoing' && m.tags?.assistantTurn ? incoming.find((x) => x.id === m.tags.assistantTurn) : null)
  const answered = new Set(messages.map((m) => askedBy(m)?.id).filter(Boolean))
  const llmLine = (c) => html`<div class="llm" data-test="llm-call">LLM <code>${c.model}</code> · ${c.inputTokens} in / ${c.outputTokens} out tokens · ${c.latencyMs} ms${c.status === 'error' ? html` · <span class="why">${c.error}</span>` : ''}${c.conversationId ? '' : html` <span class="muted">(conversation not named)</span>`}</div>`
  const failed = events.filter((ev) => ev.status === 'failed')
  return html`<h1>Emulator</h1>
    <p class="muted">You talk to the bot as a user on the platform's built-in channel <code>emulator</code>; no integration is needed.
      ${conv && html` Conversation <a href=${`#/w/${ws}/b/${bot}/conversations/${conv.id}`}><code>${conv.id}</code></a>.`}
      <button class="link" onClick=${start} disabled=${busy || off} data-test="new-conversation">New conversation</button></p>
    <div class="emulator">
      <section class="chat">
        <div class="messages" ref=${scroller} data-test="messages">
          ${messages.length === 0 && html`<${Empty}>Say something to the bot below. Its replies appear here as they come.</${Empty}>`}
          ${messages.map((m) => {
            const ev = m.direction === 'incoming' ? eventOf(m) : null
            const asked = askedBy(m)
            return html`<div class=${'bubble ' + (m.direction === 'incoming' ? 'user' : 'bot')} data-test=${m.direction === 'incoming' ? 'user-message' : 'bot-message'}>
              <div>${payloadText(m)}</div>
              <div class="meta">${new Date(m.createdAt).toLocaleTimeString()} ${ev && html`· event <${Status} value=${ev.status} />`}
                ${ev?.failureReason && html`<div class="why">${ev.failureReason}</div>`}
                ${ev && !answered.has(m.id) && callsOf(m).map(llmLine)}
                ${asked && html`<${Turn} t=${turns.get(m.id) || turns.get(asked.id)} />${callsOf(asked).map(llmLine)}`}</div>
            </div>`
          })}
        </div>
        <form class="row composer" onSubmit=${send} data-test="composer">
          <input placeholder="Message" value=${text} onInput=${(e) => setText(e.target.value)} aria-label="Message" disabled=${off} />
          <button disabled=${busy || off}>Send</button>
        </form>
        <${Refused} r=${r} action="talking to the bot in the emulator" />
        <${ErrorBox} error=${error} />
        ${failed.length > 0 && html`<div class="error" data-test="failed-events">${failed.length === 1 ? 'An event' : `${failed.length} events`} failed: the bot did not handle ${failed.length === 1 ? 'it' : 'them'}. Last reason: ${failed.at(-1).failureReason || 'none given'}</div>`}
      </section>
      <aside class="events" data-test="events">
        <h2>Events</h2>
        ${events.length === 0 ? html`<p class="muted">Events of this conversation appear here, with their delivery status.</p>` : html`<ul>
          ${events.map((ev) => html`<li><${Status} value=${ev.status} /> <code>${ev.type}</code> <span class="muted">${fmtTime(ev.createdAt)}</span>
            ${ev.failureReason && html`<div class="why">${ev.failureReason}</div>`}</li>`)}
        </ul>`}
      </aside>
    </div>`
}
