// inbox.js: humans in the loop (docs/hitl.md): the sessions the bots of a
// workspace handed to people, by status (waiting, assigned to me,
// assigned, closed), a session's transcript (what happened before the
// handover too), assign, reply with text, an image or a file, internal
// notes, close (the bot takes over again), unread counts and a browser
// notification for a new waiting session (when the operator allows it).
// Everything goes through the agent API with the console's credentials
// (api.js call()). Live updates come through the platform's stream path
// (docs/hitl.md "Live updates"): the console asks for a short-lived
// stream ticket and opens an EventSource on the workspace's inbox stream
// (where the Chat API's streams are served: this origin locally, the
// stream host on AWS); each event names a session that changed, and the
// list and the open session are read again through the agent API. A slow
// poll (every 30 s, and at once when the stream opens or drops) covers a
// lost signal or a stream that cannot open.
import { call } from './api.js'
import { html, useState, useEffect, useRef, ErrorBox, Empty, go, fmtTime } from './ui.js'
import { useRole, atLeast } from './role.js'

// pollMs is the fallback poll's period (localStorage 'inbox.pollMs' sets
// another: the inbox e2e makes it very long to see the stream alone).
const pollMs = () => Number(localStorage.getItem('inbox.pollMs')) || 30000
// noStreamPollMs is the poll's period when the platform serves no inbox
// stream (the ticket's answer says served: false: PLATFORM_BUILTINS
// without hitl); localStorage 'inbox.noStreamPollMs' sets another.
const noStreamPollMs = () => Number(localStorage.getItem('inbox.noStreamPollMs')) || 5000
const periodOf = (ws) => (streams.get(ws)?.none ? noStreamPollMs() : pollMs())
const base = (ws) => `/v1/admin/workspaces/${encodeURIComponent(ws)}/hitl/sessions`

const TABS = [
  ['waiting', 'Waiting'],
  ['mine', 'Assigned to me'],
  ['assigned', 'Assigned'],
  ['closed', 'Closed'],
]

// One inbox stream per workspace, shared by the components that listen.
// A listener gets each event's data ({botId, sessionId, change}), and null
// when the stream opens or drops (something may have been missed).
const streams = new Map()

function subscribe(ws, fn) {
  let st = streams.get(ws)
  if (!st) {
    st = { listeners: new Set(), es: null, timer: null, delay: 1000, up: false, none: false }
    streams.set(ws, st)
    openStream(ws, st)
  }
  st.listeners.add(fn)
  return () => {
    st.listeners.delete(fn)
    if (st.listeners.size === 0) {
      streams.delete(ws)
      clearTimeout(st.timer)
      if (st.es) st.es.close()
    }
  }
}

function emit(st, ev) {
  for (const fn of [...st.listeners]) fn(ev)
}

// emitLocal tells this page's listeners of a change it made itself.
function emitLocal(ws, ev) {
  const st = streams.get(ws)
  if (st) emit(st, ev)
}

// loaded settles once the document has loaded: an EventSource opened
// before the load event holds that event back while the stream stays open
// (the tab never finishes loading; console-e2e's page loads timed out).
const loaded = () =>
  document.readyState === 'complete' ? Promise.resolve() : new Promise((r) => addEventListener('load', r, { once: true }))

// A page left for another keeps its streams' connections open while the
// browser holds it in its back/forward cache, and a browser opens at most 6
// connections to a host: a few page loads in a row had none left for the
// next page's scripts (console-e2e's page loads hung). The streams close
// when the page is hidden and open again if it is shown from that cache.
addEventListener('pagehide', () => {
  for (const st of streams.values()) {
    clearTimeout(st.timer)
    if (st.es) st.es.close()
    st.es = null
  }
})
addEventListener('pageshow', (e) => {
  if (e.persisted) for (const [ws, st] of streams) if (!st.none) openStream(ws, st)
})

async function openStream(ws, st) {
  await loaded()
  if (streams.get(ws) !== st) return
  let t
  try {
    t = await call('POST', `/v1/admin/workspaces/${encodeURIComponent(ws)}/hitl/stream-ticket`)
  } catch {
    return retryStream(ws, st)
  }
  if (streams.get(ws) !== st) return
  if (t.served === false) {
    // No inbox stream on this platform: poll quietly (no EventSource
    // that would be refused and retried, a page error in Firefox).
    st.none = true
    emit(st, null)
    return
  }
  const es = new EventSource(new URL(t.url, location.href).href)
  st.es = es
  es.addEventListener('inbox', (e) => {
    let d = {}
    try {
      d = JSON.parse(e.data)
    } catch {}
    emit(st, d)
  })
  es.onopen = () => {
    st.delay = 1000
    st.up = true
    emit(st, null)
  }
  // A dropped stream (its host's invocation ended, the network) is opened
  // again with a fresh ticket: the one in its URL has expired.
  es.onerror = () => {
    es.close()
    st.es = null
    if (st.up) {
      st.up = false
      emit(st, null)
    }
    retryStream(ws, st)
  }
}

function retryStream(ws, st) {
  if (streams.get(ws) !== st) return
  st.timer = setTimeout(() => openStream(ws, st), st.delay)
  st.delay = Math.min(st.delay * 2, 30000)
}

// useLive calls load now, on each event of the workspace's inbox stream
// that match accepts (all when absent; null events always: the stream
// opened or dropped), and every pollMs() while the tab is visible; load
// gets a `live` check to drop answers that come after the component went
// away. Loads do not overlap: events during one make one more.
function useLive(ws, load, deps, match) {
  useEffect(() => {
    let stop = false
    let timer
    let running = false
    let again = false
    const run = async () => {
      if (stop) return
      if (running) {
        again = true
        return
      }
      running = true
      await load(() => !stop).catch(() => {})
      running = false
      if (again) {
        again = false
        run()
      }
    }
    const schedule = () => {
      clearTimeout(timer)
      if (!stop) timer = setTimeout(tick, periodOf(ws))
    }
    const tick = async () => {
      if (!document.hidden) await run()
      schedule()
    }
    tick()
    const off = subscribe(ws, (ev) => {
      if (!ev || !match || match(ev)) run()
      if (!ev) schedule() // opened, dropped or not served: the period may change
    })
    return () => {
      stop = true
      clearTimeout(timer)
      off()
    }
  }, deps)
}

// useStream tells whether the workspace's inbox stream is open (up), or
// not served by the platform at all (none).
function useStream(ws) {
  const [st, setSt] = useState({ up: false, none: false })
  useEffect(() => {
    const read = () => setSt({ up: !!streams.get(ws)?.up, none: !!streams.get(ws)?.none })
    const off = subscribe(ws, read)
    read() // the stream may have opened (or said none) before this listener came
    return off
  }, [ws])
  return st
}

// InboxLink is the Nav's link with the unread count of the workspace's
// open sessions.
export function InboxLink({ ws }) {
  const [unread, setUnread] = useState(0)
  useLive(ws, async (live) => {
    const r = await call('GET', base(ws))
    if (live()) setUnread(r.meta?.unread || 0)
  }, [ws])
  const href = `#/w/${ws}/inbox`
  return html`<a href=${href} class=${location.hash.startsWith(href) ? 'active' : ''} data-test="inbox-link">Inbox${unread > 0 ? html` <span class="badge" data-test="inbox-unread">${unread}</span>` : ''}</a>`
}

function notify(s) {
  if (typeof Notification === 'undefined' || Notification.permission !== 'granted') return
  try {
    new Notification('A conversation waits for a person', { body: s.title || s.userName || 'New session', tag: s.id })
  } catch {} // some browsers only notify from a service worker
}

export function Inbox({ ws, id }) {
  const [tab, setTab] = useState('waiting')
  const [list, setList] = useState(null)
  const [error, setError] = useState(null)
  const [perm, setPerm] = useState(typeof Notification === 'undefined' ? 'unsupported' : Notification.permission)
  const known = useRef(null) // waiting session ids seen (null: first load)
  const { up, none } = useStream(ws)

  useLive(ws, async (live) => {
    try {
      const r = await call('GET', base(ws))
      if (!live()) return
      const waiting = r.sessions.filter((s) => s.status === 'waiting')
      if (known.current) for (const s of waiting) if (!known.current.has(s.id)) notify(s)
      known.current = new Set(waiting.map((s) => s.id))
      setList(r)
      setError(null)
    } catch (e) {
      if (live()) setError(e)
    }
  }, [ws])

  const sessions = list?.sessions || []
  const shown = sessions.filter((s) => (tab === 'mine' ? s.status === 'assigned' && s.assigneeId === list?.meta?.accountId : s.status === tab))
  const current = id && sessions.find((s) => s.id === id)
  const counts = list?.meta?.counts || {}
  const askPerm = async () => setPerm(await Notification.requestPermission())

  return html`<h1>Inbox <small>humans in the loop</small> ${up ? html`<small class="muted" data-test="inbox-live" title="updates arrive as they happen">● live</small>` : none ? html`<small class="muted" data-test="inbox-nostream" title="this platform serves no live inbox stream (the hitl integration is not among PLATFORM_BUILTINS)">○ polling every ${Math.round(noStreamPollMs() / 1000)} s</small>` : html`<small class="muted" data-test="inbox-polling" title="the live stream is not open: the inbox is read every ${Math.round(pollMs() / 1000)} s">○ polling</small>`}</h1>
    <${ErrorBox} error=${error} />
    <div class="inbox">
      <aside class="sessions" data-test="sessions">
        <nav class="tabs">
          ${TABS.map(([k, label]) => html`<button class=${'tab' + (tab === k ? ' on' : '')} data-test=${'tab-' + k} onClick=${() => setTab(k)}>${label} <span class="muted">${counts[k] || 0}</span></button>`)}
        </nav>
        ${perm === 'default' && html`<p><button class="link" data-test="notify-ask" onClick=${askPerm}>Notify me of new waiting sessions</button></p>`}
        ${list === null ? html`<p class="muted">Loading…</p>` : shown.length === 0 ? html`<${Empty}>No session here.</${Empty}>` : html`<ul>
          ${shown.map((s) => html`<li key=${s.id} class=${'session' + (s.id === id ? ' on' : '')} data-test="session" onClick=${() => go(`/w/${ws}/inbox/${s.id}`)}>
            <strong>${s.title || 'Untitled'}</strong>${s.unread > 0 && html` <span class="badge" data-test="unread">${s.unread}</span>`}
            <div class="muted">${s.userName || s.userId} · ${fmtTime(s.updatedAt)}</div>
            <div class="muted">${s.status}${s.assigneeEmail ? ' · ' + s.assigneeEmail : ''}</div>
          </li>`)}
        </ul>`}
      </aside>
      <section class="session-view">
        ${id ? current ? html`<${Session} ws=${ws} s=${current} me=${list.meta?.accountId} agentRole=${list.meta?.agentRole} key=${id} />` : list && html`<${Empty}>This session is not among the workspace's latest.</${Empty}>` : html`<${Empty}>Choose a session.</${Empty}>`}
      </section>
    </div>`
}

function Members({ ws, onPick, disabled }) {
  const [members, setMembers] = useState([])
  useEffect(() => {
    call('GET', '/v1/admin/workspace-members', { ws }).then((r) => setMembers(r.members || []), () => setMembers([]))
  }, [ws])
  if (members.length < 2) return null
  return html`<select data-test="assign-to" disabled=${disabled} onChange=${(e) => e.target.value && onPick(e.target.value)}>
    <option value="">Assign to…</option>
    ${members.filter((m) => m.role !== 'viewer').map((m) => html`<option value=${m.userId}>${m.email}</option>`)}
  </select>`
}

function Body({ e }) {
  const p = e.payload || {}
  const url = p.imageUrl || p.fileUrl || p.audioUrl || p.videoUrl
  if (e.type === 'text') return html`<span>${p.text}</span>`
  if (e.type === 'image' && url) {
    // The console's CSP shows images of its own origin only; others are links.
    const own = url.startsWith(location.origin + '/')
    return html`<span>${own && html`<img class="shot" src=${url} alt=${p.title || 'image'} />`}<a href=${url} target="_blank" rel="noopener noreferrer">${p.title || 'image'}</a></span>`
  }
  if (url) return html`<a href=${url} target="_blank" rel="noopener noreferrer">${p.title || e.type}</a>`
  return html`<code>${JSON.stringify(p)}</code>`
}

// upload sends a file through the Files API of the session's bot, public
// (the end user's client loads it), and answers its url.
async function upload(bot, f) {
  const contentType = f.type || 'application/octet-stream'
  const key = `hitl/${Date.now()}-${f.name}`
  const { file } = await call('PUT', '/v1/files', { bot, body: { key, size: f.size, contentType, accessPolicies: ['public_content'], tags: { purpose: 'hitl' } } })
  const res = await fetch(file.uploadUrl, { method: 'PUT', headers: { 'Content-Type': contentType }, body: f })
  if (!res.ok) throw new Error(`the storage answered HTTP ${res.status}`)
  for (let i = 0; i < 100; i++) {
    const got = (await call('GET', `/v1/files/${file.id}`, { bot })).file
    if (got.status === 'upload_completed') return got.url
    if (got.status !== 'upload_pending') throw new Error(`the file is ${got.status}`)
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error('the upload did not complete')
}

function Session({ ws, s, me, agentRole }) {
  const path = `${base(ws)}/${encodeURIComponent(s.botId)}/${encodeURIComponent(s.id)}`
  const [data, setData] = useState(null)
  const [error, setError] = useState(null)
  const [text, setText] = useState('')
  const [note, setNote] = useState('')
  const [busy, setBusy] = useState(false)
  const [tick, setTick] = useState(0)
  const fileRef = useRef(null)
  const scroller = useRef(null)
  const latest = useRef(s) // the list's view of the session, for the load below
  latest.current = s

  useLive(ws, async (live) => {
    try {
      const r = await call('GET', path)
      if (live()) {
        setData(r)
        setError(null)
        // Reading it marked it read: the list's unread count follows.
        if (latest.current.unread > 0) emitLocal(ws, { botId: s.botId, sessionId: s.id, change: 'read' })
      }
    } catch (e) {
      if (live()) setError(e)
    }
  }, [path, tick], (ev) => ev.sessionId === s.id && ev.change !== 'read')
  const count = data?.transcript?.length || 0
  useEffect(() => {
    if (scroller.current) scroller.current.scrollTop = scroller.current.scrollHeight
  }, [count])

  const act = async (fn) => {
    setBusy(true)
    setError(null)
    try {
      await fn()
      setTick((n) => n + 1)
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  const reply = (type, payload) => call('POST', path + '/messages', { body: { type, payload } })
  const send = (e) => {
    e.preventDefault()
    if (!text.trim()) return
    act(async () => {
      await reply('text', { text })
      setText('')
    })
  }
  const attach = (e) => {
    const f = e.target.files?.[0]
    if (!f) return
    act(async () => {
      const url = await upload(s.botId, f)
      if (f.type.startsWith('image/')) await reply('image', { imageUrl: url, title: f.name })
      else await reply('file', { fileUrl: url, title: f.name })
      if (fileRef.current) fileRef.current.value = ''
    })
  }
  const addNote = (e) => {
    e.preventDefault()
    if (!note.trim()) return
    act(async () => {
      await call('POST', path + '/notes', { body: { text: note } })
      setNote('')
    })
  }

  const ss = data?.session || s
  const closed = ss.status === 'closed'
  // Answering (assign, reply, note, close) needs the installation's agent
  // role (PLATFORM_HITL_AGENT_ROLE, from the list's meta); below it the
  // controls are off and say why (the API refuses them 403 anyway).
  const r = useRole(ws)
  const need = agentRole || 'developer'
  const off = !atLeast(r.role, need)
  const why = `Your role in this workspace is ${r.role}: answering in the inbox (reply, assign, notes, close) needs ${need} or above.`
  return html`<div data-test="session-view">
    <h2 data-test="session-title">${ss.title || 'Untitled'} <span class=${'status s-hitl-' + ss.status} data-test="session-status">${ss.status}</span></h2>
    ${ss.description && html`<p class="muted">${ss.description}</p>`}
    <p class="row">
      <span class="muted">${ss.userName || ss.userId} · bot <code>${ss.botId}</code>${ss.assigneeEmail ? html` · assigned to <strong data-test="assignee">${ss.assigneeEmail}</strong>` : ''}</span>
      ${!closed && html`${ss.assigneeId !== me && html`<button class="secondary" disabled=${busy || off} data-test="assign-me" onClick=${() => act(() => call('POST', path + '/assign', { body: {} }))}>Assign to me</button>`}
        <${Members} ws=${ws} disabled=${off} onPick=${(accountId) => act(() => call('POST', path + '/assign', { body: { accountId } }))} />
        <button class="danger secondary" disabled=${busy || off} data-test="close" onClick=${() => confirm('Close the session? The bot takes the conversation back.') && act(() => call('POST', path + '/close'))}>Close</button>`}
    </p>
    <${ErrorBox} error=${error} />
    <div class="messages" ref=${scroller} data-test="transcript">
      ${data === null ? html`<p class="muted">Loading…</p>` : data.transcript.map((e) => html`<div key=${e.id} class=${'bubble ' + (e.role === 'agent' ? 'user' : '') + (e.before ? ' before' : '')} data-test=${'msg-' + e.role}>
        <${Body} e=${e} />
        <div class="meta">${e.before ? 'before the handover · ' : ''}${e.role}${e.before ? '' : ' · ' + fmtTime(e.createdAt)}</div>
      </div>`)}
    </div>
    ${closed ? html`<p class="notice" data-test="closed-notice">This session is closed${ss.closedBy === 'bot' ? ' by the bot (the user ended it, or no agent took it in time)' : ''}: the bot answers the user again.</p>` : html`<form class="row composer" onSubmit=${send} data-test="reply">
      <input placeholder="Reply to the user…" value=${text} onInput=${(e) => setText(e.target.value)} disabled=${busy || off} />
      <button type="submit" disabled=${busy || off || !text.trim()}>Send</button>
      <label class="inline"><span class="link">Attach</span><input type="file" ref=${fileRef} data-test="attach" onChange=${attach} disabled=${busy || off} /></label>
    </form>`}
    ${off && html`<p class="muted refused" data-test="refused">${why}</p>`}
    <h2>Internal notes <small class="muted">agents only</small></h2>
    <ul class="notes" data-test="notes">
      ${(ss.notes || []).map((n) => html`<li key=${n.id}><span>${n.text}</span> <span class="muted">— ${n.authorEmail || n.authorId}, ${fmtTime(n.createdAt)}</span></li>`)}
    </ul>
    <form class="row" onSubmit=${addNote} data-test="note">
      <input placeholder="A note for the other agents…" value=${note} onInput=${(e) => setNote(e.target.value)} disabled=${busy || off} />
      <button type="submit" class="secondary" disabled=${busy || off || !note.trim()}>Add note</button>
    </form>
  </div>`
}
