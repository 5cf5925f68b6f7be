// data.js: a bot's data through the Chat, Tables and Files APIs and its
// logs and issues (Admin API): conversations and messages, users, states,
// tables as a grid, files, logs with a live tail, issues.
import { call, all, upload, session, ApiError } from './api.js'
import { html, useState, useEffect, useRef, useLoad, Loaded, ErrorBox, Empty, useAction, Json, Status, Progress, fmtTime } from './ui.js'
import { payloadText } from './emulator.js'
import { useRole, Refused } from './role.js'

const tagsText = (t) => Object.entries(t || {}).map(([k, v]) => `${k}=${v}`).join(', ')

export function Conversations({ ws, bot }) {
  const st = useLoad(() => all('GET', '/v1/chat/conversations', 'conversations', { bot }, 200), [bot])
  return html`<h1>Conversations</h1>
    <${Loaded} st=${st}>${(cs) => cs.length === 0
      ? html`<${Empty}>No conversation yet. Open the <a href=${`#/w/${ws}/b/${bot}/emulator`}>emulator</a> to start one.</${Empty}>`
      : html`<table class="list" data-test="conversations"><thead><tr><th>Id</th><th>Channel</th><th>Integration</th><th>Tags</th><th>Updated</th></tr></thead><tbody>
        ${cs.map((c) => html`<tr><td><a href=${`#/w/${ws}/b/${bot}/conversations/${c.id}`}><code>${c.id}</code></a></td><td>${c.channel}</td><td>${c.integration}</td><td>${tagsText(c.tags)}</td><td>${fmtTime(c.updatedAt)}</td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}

export function Conversation({ ws, bot, id }) {
  const st = useLoad(async () => {
    const [{ conversation }, messages, events] = await Promise.all([
      call('GET', `/v1/chat/conversations/${id}`, { bot }),
      all('GET', '/v1/chat/messages', 'messages', { bot, query: { conversationId: id } }, 500),
      all('GET', '/v1/chat/events', 'events', { bot, query: { conversationId: id } }, 500),
    ])
    messages.sort((a, b) => a.createdAt.localeCompare(b.createdAt))
    return { conversation, messages, events }
  }, [bot, id])
  const [open, setOpen] = useState(null)
  return html`<h1>Conversation <small><code>${id}</code></small></h1>
    <${Loaded} st=${st}>${({ conversation, messages, events }) => html`
      <p class="muted">Channel ${conversation.channel} · integration ${conversation.integration || '—'} · tags ${tagsText(conversation.tags) || '—'}</p>
      <h2>Messages</h2>
      ${messages.length === 0 ? html`<${Empty}>No message.</${Empty}>` : html`<table class="list" data-test="message-list"><thead><tr><th>When</th><th>Direction</th><th>Type</th><th>Content</th><th>Event</th></tr></thead><tbody>
        ${messages.map((m) => {
          const ev = events.find((e) => e.messageId === m.id)
          return html`<tr class="clickable" onClick=${() => setOpen(open === m.id ? null : m.id)}><td>${fmtTime(m.createdAt)}</td><td>${m.direction}</td><td>${m.type}</td><td>${payloadText(m)}
            ${open === m.id && html`<${Json} value=${m} />`}</td><td>${ev ? html`<${Status} value=${ev.status} /> ${ev.failureReason || ''}` : ''}</td></tr>`
        })}
      </tbody></table>`}
      <h2>Events</h2>
      ${events.length === 0 ? html`<${Empty}>No event.</${Empty}>` : html`<table class="list"><thead><tr><th>When</th><th>Type</th><th>Status</th><th>Failure reason</th></tr></thead><tbody>
        ${events.map((e) => html`<tr><td>${fmtTime(e.createdAt)}</td><td><code>${e.type}</code></td><td><${Status} value=${e.status} /></td><td>${e.failureReason || ''}</td></tr>`)}
      </tbody></table>`}`}</${Loaded}>`
}

export function Users({ bot }) {
  const st = useLoad(() => all('GET', '/v1/chat/users', 'users', { bot }, 200), [bot])
  return html`<h1>Users</h1>
    <${Loaded} st=${st}>${(us) => us.length === 0 ? html`<${Empty}>No user yet: users are created by integrations (and by the emulator) when someone talks to the bot.</${Empty}>`
      : html`<table class="list"><thead><tr><th>Id</th><th>Name</th><th>Tags</th><th>Created</th></tr></thead><tbody>
        ${us.map((u) => html`<tr><td><code>${u.id}</code></td><td>${u.name || ''}</td><td>${tagsText(u.tags)}</td><td>${fmtTime(u.createdAt)}</td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}

export function States({ bot }) {
  const [q, setQ] = useState({ type: 'conversation', id: '', name: '' })
  const [state, setState] = useState(null)
  const act = useAction()
  const get = (e) => {
    e.preventDefault()
    setState(null)
    act.run(async () => setState((await call('GET', `/v1/chat/states/${q.type}/${encodeURIComponent(q.id)}/${encodeURIComponent(q.name)}`, { bot })).state))
  }
  const set = (k) => (e) => setQ({ ...q, [k]: e.target.value })
  return html`<h1>States</h1>
    <p class="muted">A state belongs to a conversation, a user, the bot or a task, under a name of the bot's definition. The API reads one at a time (there is no listing).</p>
    <form class="row" onSubmit=${get}>
      <select value=${q.type} onChange=${set('type')}>${['conversation', 'user', 'bot', 'task', 'integration', 'workflow'].map((t) => html`<option>${t}</option>`)}</select>
      <input placeholder="Id (conversation, user or bot id)" required value=${q.id} onInput=${set('id')} />
      <input placeholder="State name" required value=${q.name} onInput=${set('name')} />
      <button disabled=${act.busy}>Get state</button>
    </form>
    <${ErrorBox} error=${act.error} />
    ${state && html`<p class="muted">Updated ${fmtTime(state.updatedAt)}${state.expiresAt ? ' · expires ' + fmtTime(state.expiresAt) : ''}</p><${Json} value=${state.payload} />`}`
}

export function Tables({ ws, bot }) {
  const st = useLoad(() => call('GET', '/v1/tables', { bot }).then((r) => r.tables), [bot])
  const [name, setName] = useState('')
  const [cols, setCols] = useState('title:string')
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may('changing tables and rows')
  const create = (e) => {
    e.preventDefault()
    act.run(async () => {
      const properties = {}
      for (const c of cols.split(',').map((s) => s.trim()).filter(Boolean)) {
        const [n, t = 'string'] = c.split(':').map((s) => s.trim())
        properties[n] = { type: t }
      }
      await call('POST', '/v1/tables', { bot, body: { name, schema: { type: 'object', properties } } })
      setName('')
      st.reload()
    })
  }
  return html`<h1>Tables</h1>
    <form class="row" onSubmit=${create} data-test="create-table">
      <input placeholder="Name (ends with Table, e.g. ticketsTable)" required value=${name} onInput=${(e) => setName(e.target.value)} disabled=${off} />
      <input placeholder="Columns: name:type, ..." value=${cols} onInput=${(e) => setCols(e.target.value)} disabled=${off} />
      <button disabled=${act.busy || off}>Create table</button>
    </form>
    <${Refused} r=${r} action="changing tables and rows" />
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(ts) => ts.length === 0 ? html`<${Empty}>No table: create one above, or from the bot's code.</${Empty}>`
      : html`<table class="list"><thead><tr><th>Name</th><th>Columns</th><th>Rows</th><th>Updated</th></tr></thead><tbody>
        ${ts.map((t) => html`<tr><td><a href=${`#/w/${ws}/b/${bot}/tables/${t.name}`}>${t.name}</a></td><td>${Object.keys(t.schema?.properties || {}).join(', ')}</td><td>${t.rows ?? ''}</td><td>${fmtTime(t.updatedAt)}</td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}

// cellValue turns an input's text into a value of the column's type.
function cellValue(text, type) {
  if (text === '') return null
  if (type === 'number') {
    const n = Number(text)
    if (Number.isNaN(n)) throw new ApiError({ status: 400, type: 'InvalidInput', message: `"${text}" is not a number` })
    return n
  }
  if (type === 'boolean') return text === 'true'
  if (type === 'object' || type === 'array') {
    try {
      return JSON.parse(text)
    } catch {
      throw new ApiError({ status: 400, type: 'InvalidInput', message: `"${text}" is not JSON` })
    }
  }
  return text
}
const cellText = (v) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v))

const PAGE = 50

export function TableGrid({ ws, bot, name }) {
  const [view, setView] = useState({ orderBy: 'id', dir: 'asc', col: '', value: '', offset: 0 })
  const [filterInput, setFilterInput] = useState({ col: '', value: '' })
  const table = useLoad(() => call('GET', `/v1/tables/${name}`, { bot }).then((r) => r.table), [bot, name])
  const cols = Object.entries(table.data?.schema?.properties || {})
  const rows = useLoad(() => {
    const body = { limit: PAGE, offset: view.offset, orderBy: view.orderBy, orderDirection: view.dir }
    if (view.col && view.value !== '') {
      const type = table.data?.schema?.properties?.[view.col]?.type
      body.filter = { [view.col]: { $eq: cellValue(view.value, type) } }
    }
    return call('POST', `/v1/tables/${name}/rows/find`, { bot, body })
  }, [bot, name, view, table.data])
  const [editing, setEditing] = useState(null) // {id, values}
  const [adding, setAdding] = useState({})
  const [job, setJob] = useState(null)
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may('changing tables and rows')

  const sortBy = (c) => setView({ ...view, orderBy: c, dir: view.orderBy === c && view.dir === 'asc' ? 'desc' : 'asc', offset: 0 })
  const save = () => act.run(async () => {
    const row = { id: editing.id }
    for (const [c, s] of cols) row[c] = cellValue(editing.values[c] ?? '', s.type)
    await call('PUT', `/v1/tables/${name}/rows`, { bot, body: { rows: [row] } })
    setEditing(null)
    rows.reload()
  })
  const removeRow = (row) => confirm(`Delete row ${row.id}?`) && act.run(async () => {
    await call('POST', `/v1/tables/${name}/rows/delete`, { bot, body: { ids: [row.id] } })
    rows.reload()
  })
  const add = (e) => {
    e.preventDefault()
    act.run(async () => {
      const row = {}
      for (const [c, s] of cols) if ((adding[c] ?? '') !== '') row[c] = cellValue(adding[c], s.type)
      await call('POST', `/v1/tables/${name}/rows`, { bot, body: { rows: [row] } })
      setAdding({})
      rows.reload()
    })
  }
  const duplicate = () => act.run(async () => {
    const r = await call('POST', `/v1/tables/${name}/duplicate`, { bot, body: { tableName: `${name.replace(/Table$/, '')}Copy${Date.now() % 100000}Table` } })
    const label = html`Duplicate to <a href=${`#/w/${ws}/b/${bot}/tables/${r.table.name}`}>${r.table.name}</a> (${r.rows} rows)`
    await watchJob(bot, r.table.id, r.job || { status: 'completed' }, (j) => setJob({ label, status: j.status, progress: jobProgress(j) }))
  })
  const importFile = useRef(null)
  const doImport = (e) => {
    e.preventDefault()
    const f = importFile.current.files[0]
    if (!f) return
    act.run(async () => {
      const label = `Import of ${f.name}`
      const file = await uploadFile(bot, f, `imports/${name}/${Date.now()}-${f.name}`, { purpose: 'table-import' }, (status, progress) => setJob({ label: `${label}: upload`, status, progress }))
      const { job: started } = await call('POST', `/v1/tables/${name}/import`, { bot, body: { fileId: file.id } })
      const tableId = table.data?.id || name
      const end = await watchJob(bot, tableId, started, (j) => setJob({ label, status: j.status, progress: jobProgress(j) }))
      importFile.current.value = ''
      if (end.status === 'completed') rows.reload()
    })
  }
  return html`<h1>Table ${name}</h1>
    <${ErrorBox} error=${table.error} />
    <form class="row" onSubmit=${(e) => { e.preventDefault(); setView({ ...view, ...filterInput, offset: 0 }) }} data-test="filter">
      <select value=${filterInput.col} onChange=${(e) => setFilterInput({ ...filterInput, col: e.target.value })}><option value="">Filter on…</option>${cols.map(([c]) => html`<option>${c}</option>`)}</select>
      <input placeholder="equals value" value=${filterInput.value} onInput=${(e) => setFilterInput({ ...filterInput, value: e.target.value })} />
      <button>Filter</button>
      <button type="button" class="link" onClick=${() => { setFilterInput({ col: '', value: '' }); setView({ ...view, col: '', value: '', offset: 0 }) }}>Clear</button>
      <button type="button" class="secondary" onClick=${duplicate} disabled=${act.busy || off}>Duplicate table</button>
    </form>
    <form class="row" onSubmit=${doImport} data-test="import">
      <label class="inline">Import rows from a file (CSV with a header, or JSON) <input type="file" ref=${importFile} required accept=".csv,.json,.gz,text/csv,application/json" disabled=${off} /></label>
      <button class="secondary" disabled=${act.busy || off}>Import</button>
    </form>
    <${Refused} r=${r} action="changing tables and rows" />
    ${job && html`<div class="notice" data-test="job">${job.label}: ${job.status}<${Progress} value=${job.progress} /></div>`}
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${rows}>${(r) => html`<div class="scroll"><table class="grid" data-test="grid"><thead><tr>
        ${[['id'], ...cols].map(([c]) => html`<th><button class="link" onClick=${() => sortBy(c)}>${c}${view.orderBy === c ? (view.dir === 'asc' ? ' ▲' : ' ▼') : ''}</button></th>`)}<th></th></tr></thead>
      <tbody>
        ${r.rows.length === 0 && html`<tr><td colspan=${cols.length + 2}><${Empty}>${view.col ? 'No row matches the filter.' : 'No row yet: add one below.'}</${Empty}></td></tr>`}
        ${r.rows.map((row) => editing?.id === row.id
          ? html`<tr class="editing" data-test="editing-row"><td>${row.id}</td>${cols.map(([c]) => html`<td><input name=${c} value=${editing.values[c] ?? ''} onInput=${(e) => setEditing({ ...editing, values: { ...editing.values, [c]: e.target.value } })} /></td>`)}
              <td><button onClick=${save} disabled=${act.busy} data-test="save-row">Save</button> <button class="link" onClick=${() => setEditing(null)}>Cancel</button></td></tr>`
          : html`<tr data-test="row"><td>${row.id}</td>${cols.map(([c]) => html`<td>${cellText(row[c])}</td>`)}
              <td><button class="link" data-test="edit-row" disabled=${off} onClick=${() => setEditing({ id: row.id, values: Object.fromEntries(cols.map(([c]) => [c, cellText(row[c])])) })}>Edit</button>
                <button class="link danger" disabled=${off} onClick=${() => removeRow(row)}>Delete</button></td></tr>`)}
        ${!off && html`<tr class="adding"><td>new</td>${cols.map(([c]) => html`<td><input name=${'new-' + c} placeholder=${c} value=${adding[c] ?? ''} onInput=${(e) => setAdding({ ...adding, [c]: e.target.value })} /></td>`)}
          <td><button onClick=${add} disabled=${act.busy} data-test="add-row">Add row</button></td></tr>`}
      </tbody></table></div>
      <p class="row">
        <button class="secondary" disabled=${view.offset === 0} onClick=${() => setView({ ...view, offset: Math.max(0, view.offset - PAGE) })}>Previous</button>
        <span class="muted">rows ${r.rows.length ? view.offset + 1 : 0}–${view.offset + r.rows.length}</span>
        <button class="secondary" disabled=${!r.hasMore} onClick=${() => setView({ ...view, offset: view.offset + PAGE })}>Next</button>
      </p>`}</${Loaded}>`
}

// uploadFile sends a browser File through the Files API: upsertFile, the
// content to its uploadUrl (onStatus(status, progress 0..1)), then getFile
// until the upload, and with opts.index its indexing into passages (the
// knowledge base's search, docs/files.md), is done. It answers the file.
// The files page and the assistant's documents (assistant.js) both use it.
export async function uploadFile(bot, f, key, tags, onStatus, opts = {}) {
  // A type the browser does not know (.md in some browsers): the platform
  // infers it from the key's extension, and the upload sends what it says.
  onStatus('creating', 0)
  const body = { key, size: f.size, tags }
  if (f.type) body.contentType = f.type
  if (opts.index) body.index = true
  const { file } = await call('PUT', '/v1/files', { bot, body })
  onStatus('uploading', 0)
  await upload(file.uploadUrl, f, file.contentType || f.type, (p) => onStatus('uploading', p))
  // Locally the upload's PUT completes (and indexes) the file; on AWS the
  // storage's event does, a moment later (indexing: up to minutes).
  const deadline = Date.now() + (opts.index ? 300000 : 20000)
  let got = file
  for (;;) {
    got = (await call('GET', `/v1/files/${file.id}`, { bot })).file
    if (got.status !== 'upload_pending' && got.status !== 'indexing_pending') break
    if (Date.now() > deadline) break
    onStatus(got.status, 1)
    await new Promise((r) => setTimeout(r, 500))
  }
  onStatus(got.status, 1)
  if (got.status !== 'upload_completed' && got.status !== 'indexing_completed') throw new ApiError({ status: 0, type: 'UploadFailed', message: `${f.name}: the file is ${got.status}${got.failedStatusReason ? ': ' + got.failedStatusReason : ''}` })
  return got
}

// watchJob polls a table's job (getTableJobs) every second until it ends,
// calling onUpdate with it; it answers the last state.
async function watchJob(bot, tableId, job, onUpdate) {
  onUpdate(job)
  while (job.status !== 'completed' && job.status !== 'failed') {
    await new Promise((r) => setTimeout(r, 1000))
    const { jobs } = await call('GET', `/v1/tables/${tableId}/jobs`, { bot })
    job = jobs.find((x) => x.id === job.id) || job
    onUpdate(job)
  }
  return job
}
const jobProgress = (j) => (j.status === 'completed' ? 1 : j.progress > 1 ? j.progress / 100 : j.progress || 0)

export function Files({ ws, bot }) {
  const tags = useLoad(() => call('GET', '/v1/files/tags', { bot }).then((r) => r.tags).catch(() => []), [bot])
  const [tag, setTag] = useState({ name: '', value: '' })
  const [shown, setShown] = useState({ name: '', value: '' })
  const st = useLoad(() => all('GET', '/v1/files', 'files', { bot, query: shown.name ? { [`tags[${shown.name}]`]: shown.value } : {} }, 200), [bot, shown])
  const [up, setUp] = useState(null) // {name, progress, status}
  const [upTags, setUpTags] = useState('')
  const [upIndex, setUpIndex] = useState(false)
  const act = useAction()
  const fileInput = useRef(null)
  const r = useRole(ws)
  const off = !r.may('uploading and deleting files')

  const doUpload = (e) => {
    e.preventDefault()
    const f = fileInput.current.files[0]
    if (!f) return
    act.run(async () => {
      const t = {}
      for (const p of upTags.split(',').map((s) => s.trim()).filter(Boolean)) {
        const [k, v = ''] = p.split('=')
        t[k.trim()] = v.trim()
      }
      try {
        await uploadFile(bot, f, f.name, t, (status, progress) => setUp({ name: f.name, progress, status }), { index: upIndex })
      } finally {
        st.reload()
      }
      fileInput.current.value = ''
      st.reload()
      tags.reload()
    }).catch(() => {})
  }
  const download = (f) => act.run(async () => {
    const { file } = await call('GET', `/v1/files/${f.id}`, { bot })
    if (!file.url) throw new ApiError({ status: 0, message: `the file is ${file.status}: nothing to download yet` })
    const res = await fetch(file.url, { headers: { Authorization: `Bearer ${session.token}`, 'x-bot-id': bot } })
    if (!res.ok) {
      const body = await res.json().catch(() => null)
      throw new ApiError({ status: res.status, type: body?.type || 'DownloadFailed', message: body?.message || `HTTP ${res.status}` })
    }
    const blob = await res.blob()
    const a = document.createElement('a')
    a.href = URL.createObjectURL(blob)
    a.download = f.key.split('/').pop()
    document.body.append(a)
    a.click()
    a.remove()
    setTimeout(() => URL.revokeObjectURL(a.href), 10000)
  })
  const remove = (f) => confirm(`Delete ${f.key}?`) && act.run(async () => { await call('DELETE', `/v1/files/${f.id}`, { bot }); st.reload() })
  return html`<h1>Files</h1>
    <form class="row" onSubmit=${doUpload} data-test="upload">
      <input type="file" ref=${fileInput} required name="file" disabled=${off} />
      <input placeholder="Tags: name=value, ..." value=${upTags} onInput=${(e) => setUpTags(e.target.value)} disabled=${off} />
      <label class="inline" title="Split its text into passages that searchFiles (and an assistant) can find"><input type="checkbox" checked=${upIndex} onChange=${(e) => setUpIndex(e.target.checked)} disabled=${off} /> Index for search</label>
      <button disabled=${act.busy || off}>Upload</button>
    </form>
    <${Refused} r=${r} action="uploading and deleting files" />
    ${up && html`<div class="notice" data-test="upload-status">${up.name}: ${up.status} <${Progress} value=${up.progress} /></div>`}
    <form class="row" onSubmit=${(e) => { e.preventDefault(); setShown(tag) }}>
      <select value=${tag.name} onChange=${(e) => setTag({ ...tag, name: e.target.value })}><option value="">All files (or by tag…)</option>${(tags.data || []).map((t) => html`<option>${t}</option>`)}</select>
      <input placeholder="tag value" value=${tag.value} onInput=${(e) => setTag({ ...tag, value: e.target.value })} />
      <button class="secondary">List</button>
    </form>
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(fs) => fs.length === 0 ? html`<${Empty}>No file${shown.name ? ' with this tag' : ''}: upload one above.</${Empty}>`
      : html`<table class="list" data-test="files"><thead><tr><th>Key</th><th>Size</th><th>Type</th><th>Status</th><th>Tags</th><th></th></tr></thead><tbody>
        ${fs.map((f) => html`<tr><td>${f.key}</td><td>${f.size ?? ''}</td><td>${f.contentType}</td><td><${Status} value=${f.status} /></td><td>${tagsText(f.tags)}</td>
          <td><button class="link" data-test="download" onClick=${() => download(f)}>Download</button> <button class="link danger" disabled=${off} onClick=${() => remove(f)}>Delete</button></td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}

export function Logs({ ws, bot }) {
  const [filters, setFilters] = useState({ level: '', messageContains: '', conversationId: '', since: 60 })
  const [lines, setLines] = useState([])
  const [tail, setTail] = useState(true)
  const [error, setError] = useState(null)
  const seen = useRef(new Set())
  useEffect(() => {
    seen.current = new Set()
    setLines([])
    let stop = false
    let timer
    let start = new Date(Date.now() - filters.since * 60000).toISOString()
    const tick = async () => {
      try {
        const got = []
        let nextToken
        do {
          const r = await call('GET', `/v1/admin/bots/${bot}/logs`, { ws, query: { timeStart: start, level: filters.level, messageContains: filters.messageContains, conversationId: filters.conversationId, pageSize: 100, nextToken } })
          got.push(...r.logs)
          nextToken = r.nextToken
        } while (nextToken && got.length < 1000 && !stop)
        if (stop) return
        const fresh = got.filter((l) => {
          const k = l.timestamp + '|' + l.message
          if (seen.current.has(k)) return false
          seen.current.add(k)
          return true
        })
        if (fresh.length) {
          setLines((ls) => [...ls, ...fresh].sort((a, b) => b.timestamp.localeCompare(a.timestamp)).slice(0, 2000))
          start = fresh.reduce((m, l) => (l.timestamp > m ? l.timestamp : m), start)
        }
        setError(null)
      } catch (e) {
        if (!stop) setError(e)
      }
      if (!stop && tail) timer = setTimeout(tick, 2000)
    }
    tick()
    return () => { stop = true; clearTimeout(timer) }
  }, [bot, filters, tail])
  const [form, setForm] = useState(filters)
  const set = (k) => (e) => setForm({ ...form, [k]: e.target.value })
  return html`<h1>Logs</h1>
    <form class="row" onSubmit=${(e) => { e.preventDefault(); setFilters({ ...form, since: Number(form.since) || 60 }) }} data-test="log-filters">
      <select value=${form.level} onChange=${set('level')}><option value="">Any level</option>${['debug', 'info', 'warn', 'error'].map((l) => html`<option>${l}</option>`)}</select>
      <input placeholder="Message contains" value=${form.messageContains} onInput=${set('messageContains')} />
      <input placeholder="Conversation id" value=${form.conversationId} onInput=${set('conversationId')} />
      <label class="inline">Last <input class="num" type="number" min="1" value=${form.since} onInput=${set('since')} /> min</label>
      <button>Apply</button>
      <label class="inline"><input type="checkbox" checked=${tail} onChange=${(e) => setTail(e.target.checked)} /> Live tail</label>
    </form>
    <${ErrorBox} error=${error} />
    ${lines.length === 0 ? html`<${Empty}>No log line in this window. Lines appear here as the platform delivers to the bot (emulator, recurring events, integrations).</${Empty}>`
      : html`<div class="logs" data-test="logs">${lines.map((l) => html`<div class=${'log l-' + l.level}><span class="muted">${fmtTime(l.timestamp)}</span> <b>${l.level}</b> ${l.message}</div>`)}</div>`}`
}

export function Issues({ ws, bot }) {
  const st = useLoad(() => call('GET', `/v1/admin/bots/${bot}/issues`, { ws }).then((r) => r.issues), [bot])
  const [open, setOpen] = useState(null)
  const evs = useLoad(() => (open ? call('GET', `/v1/admin/bots/${bot}/issues/${open}/events`, { ws }).then((r) => r.issueEvents) : Promise.resolve([])), [open])
  return html`<h1>Issues</h1>
    <${Loaded} st=${st}>${(is) => is.length === 0 ? html`<${Empty}>No issue: failures of the bot's deliveries and code are grouped here.</${Empty}>`
      : html`<table class="list" data-test="issues"><thead><tr><th>Title</th><th>Category</th><th>Events</th><th>Last seen</th></tr></thead><tbody>
        ${is.map((i) => html`<tr class="clickable" onClick=${() => setOpen(open === i.id ? null : i.id)}><td>${i.title}<div class="muted">${i.description}</div>
          ${open === i.id && html`<${Loaded} st=${evs}>${(es) => html`<ul class="issue-events" data-test="issue-events">${es.map((e) => html`<li>${fmtTime(e.createdAt)}<dl class="facts">${Object.entries(e.data || {}).map(([k, v]) => html`<dt>${k}</dt><dd>${v?.pretty ?? v?.raw ?? JSON.stringify(v)}</dd>`)}</dl></li>`)}</ul>`}</${Loaded}>`}</td>
          <td>${i.category}</td><td>${i.eventsCount ?? ''}</td><td>${fmtTime(i.lastSeenAt)}</td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}
