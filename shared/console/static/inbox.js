// inbox.js: humans in the loop (docs/hitl.md): the sessions the bots of a
// workspace handed to people, by status (waiting, assigned to me,
// assigned, closed), a session's transcript (what happened before the
// handover too), assign, reply with text, an image or a file, internal
// notes, close (the bot takes over again), unread counts and a browser
// notification for a new waiting session (when the operator allows it).
// Everything goes through the agent API with the console's credentials
// (api.js call()). Live updates are polled (the list every 2 s, the open
// session every 1.5 s, while the tab is visible): the platform's chat
// streams are the end users' (a user key per conversation), not an agent's.
import { call } from './api.js'
import { html, useState, useEffect, useRef, ErrorBox, Empty, go, fmtTime } from './ui.js'

const LIST_MS = 2000
const SESSION_MS = 1500
const base = (ws) => `/v1/admin/workspaces/${encodeURIComponent(ws)}/hitl/sessions`

const TABS = [
  ['waiting', 'Waiting'],
  ['mine', 'Assigned to me'],
  ['assigned', 'Assigned'],
  ['closed', 'Closed'],
]

// usePoll calls load now and every ms while the tab is visible; load gets
// a `live` check to drop answers that come after the component went away.
function usePoll(load, ms, deps) {
  useEffect(() => {
    let stop = false
    let timer
    const tick = async () => {
      if (!document.hidden) await load(() => !stop).catch(() => {})
      if (!stop) timer = setTimeout(tick, ms)
    }
    tick()
    return () => {
      stop = true
      clearTimeout(timer)
    }
  }, deps)
}

// InboxLink is the Nav's link with the unread count of the workspace's
// open sessions.
export function InboxLink({ ws }) {
  const [unread, setUnread] = useState(0)
  usePoll(async (live) => {
    const r = await call('GET', base(ws))
    if (live()) setUnread(r.meta?.unread || 0)
  }, 5000, [ws])
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

  usePoll(async (live) => {
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
  }, LIST_MS, [ws])

  const sessions = list?.sessions || []
  const shown = sessions.filter((s) => (tab === 'mine' ? s.status === 'assigned' && s.assigneeId === list?.meta?.accountId : s.status === tab))
  const current = id && sessions.find((s) => s.id === id)
  const counts = list?.meta?.counts || {}
  const askPerm = async () => setPerm(await Notification.requestPermission())

  return html`<h1>Inbox <small>humans in the loop</small></h1>
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
        ${id ? current ? html`<${Session} ws=${ws} s=${current} me=${list.meta?.accountId} key=${id} />` : list && html`<${Empty}>This session is not among the workspace's latest.</${Empty}>` : html`<${Empty}>Choose a session.</${Empty}>`}
      </section>
    </div>`
}

function Members({ ws, onPick }) {
  const [members, setMembers] = useState([])
  useEffect(() => {
    call('GET', '/v1/admin/workspace-members', { ws }).then((r) => setMembers(r.members || []), () => setMembers([]))
  }, [ws])
  if (members.length < 2) return null
  return html`<select data-test="assign-to" onChange=${(e) => e.target.value && onPick(e.target.value)}>
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

function Session({ ws, s, me }) {
  const path = `${base(ws)}/${encodeURIComponent(s.botId)}/${encodeURIComponent(s.id)}`
  const [data, setData] = useState(null)
  const [error, setError] = useState(null)
  const [text, setText] = useState('')
  const [note, setNote] = useState('')
  const [busy, setBusy] = useState(false)
  const [tick, setTick] = useState(0)
  const fileRef = useRef(null)
  const scroller = useRef(null)

  usePoll(async (live) => {
    try {
      const r = await call('GET', path)
      if (live()) {
        setData(r)
        setError(null)
      }
    } catch (e) {
      if (live()) setError(e)
    }
  }, SESSION_MS, [path, tick])
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
  return html`<div data-test="session-view">
    <h2 data-test="session-title">${ss.title || 'Untitled'} <span class=${'status s-hitl-' + ss.status} data-test="session-status">${ss.status}</span></h2>
    ${ss.description && html`<p class="muted">${ss.description}</p>`}
    <p class="row">
      <span class="muted">${ss.userName || ss.userId} · bot <code>${ss.botId}</code>${ss.assigneeEmail ? html` · assigned to <strong data-test="assignee">${ss.assigneeEmail}</strong>` : ''}</span>
      ${!closed && html`${ss.assigneeId !== me && html`<button class="secondary" disabled=${busy} data-test="assign-me" onClick=${() => act(() => call('POST', path + '/assign', { body: {} }))}>Assign to me</button>`}
        <${Members} ws=${ws} onPick=${(accountId) => act(() => call('POST', path + '/assign', { body: { accountId } }))} />
        <button class="danger secondary" disabled=${busy} data-test="close" onClick=${() => confirm('Close the session? The bot takes the conversation back.') && act(() => call('POST', path + '/close'))}>Close</button>`}
    </p>
    <${ErrorBox} error=${error} />
    <div class="messages" ref=${scroller} data-test="transcript">
      ${data === null ? html`<p class="muted">Loading…</p>` : data.transcript.map((e) => html`<div key=${e.id} class=${'bubble ' + (e.role === 'agent' ? 'user' : '') + (e.before ? ' before' : '')} data-test=${'msg-' + e.role}>
        <${Body} e=${e} />
        <div class="meta">${e.before ? 'before the handover · ' : ''}${e.role}${e.before ? '' : ' · ' + fmtTime(e.createdAt)}</div>
      </div>`)}
    </div>
    ${closed ? html`<p class="notice" data-test="closed-notice">This session is closed${ss.closedBy === 'bot' ? ' by the bot (the user ended it, or no agent took it in time)' : ''}: the bot answers the user again.</p>` : html`<form class="row composer" onSubmit=${send} data-test="reply">
      <input placeholder="Reply to the user…" value=${text} onInput=${(e) => setText(e.target.value)} disabled=${busy} />
      <button type="submit" disabled=${busy || !text.trim()}>Send</button>
      <label class="inline"><span class="link">Attach</span><input type="file" ref=${fileRef} data-test="attach" onChange=${attach} disabled=${busy} /></label>
    </form>`}
    <h2>Internal notes <small class="muted">agents only</small></h2>
    <ul class="notes" data-test="notes">
      ${(ss.notes || []).map((n) => html`<li key=${n.id}><span>${n.text}</span> <span class="muted">— ${n.authorEmail || n.authorId}, ${fmtTime(n.createdAt)}</span></li>`)}
    </ul>
    <form class="row" onSubmit=${addNote} data-test="note">
      <input placeholder="A note for the other agents…" value=${note} onInput=${(e) => setNote(e.target.value)} disabled=${busy} />
      <button type="submit" class="secondary" disabled=${busy || !note.trim()}>Add note</button>
    </form>
  </div>`
}
