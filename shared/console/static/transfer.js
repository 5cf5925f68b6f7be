// transfer.js: export and import from the console (docs/export-import.md,
// "From the console"). #/w/<ws>/transfer exports the workspace and imports
// an archive into it; #/w/<ws>/b/<bot>/transfer exports that bot. The
// platform runs each as a job (shared/transfer jobs.go: the CLI's export
// and import, calling the API with this page's credentials) and the page
// polls its progress: the page needs no open stream (the inbox's already
// holds one of the browser's six connections per host), and the archive
// downloads from a file through the browser's own download manager.
// On AWS the API answers that the CLI does it there, and the page says so.
import { session, ApiError, call } from './api.js'
import { html, useState, useEffect, useAction, ErrorBox, Progress, fmtTime } from './ui.js'
import { useRole, Refused } from './role.js'
import { fmtSize } from './backups.js'

const POLL_MS = 250

// useJob follows a job: its last state, polled while it runs.
function useJob(ws) {
  const [job, setJob] = useState(null)
  const [error, setError] = useState(null)
  useEffect(() => {
    if (!job || job.status !== 'running') return
    let live = true
    const t = setTimeout(() => {
      call('GET', `/v1/admin/transfer/jobs/${encodeURIComponent(job.id)}`, { ws }).then(
        (r) => live && setJob(r.job),
        (e) => live && setError(e),
      )
    }, POLL_MS)
    return () => { live = false; clearTimeout(t) }
  }, [job])
  return { job, setJob, error, setError }
}

const num = (n) => Number(n || 0).toLocaleString('en')

// ExportBar: an export's progress: records against the source's own
// count (an estimate: the bar stops short of the end until it is done).
function ExportBar({ job }) {
  const done = job.status === 'done'
  const v = done ? 1 : job.totalRecords ? Math.min(0.99, job.records / job.totalRecords) : 0
  const label = done
    ? `${num(job.entries)} entries, ${fmtSize(job.bytes)}`
    : `${num(job.records)} of about ${num(job.totalRecords)} records · ${fmtSize(job.bytes)}`
  return html`<div data-test="export-progress" data-value=${v.toFixed(4)} data-status=${job.status}><${Progress} value=${v} label=${label} /></div>`
}

function ExportPanel({ ws, bot, r }) {
  const act = useAction()
  const { job, setJob, error } = useJob(ws)
  const [secrets, setSecrets] = useState(false)
  const [pass, setPass] = useState('')
  const allowed = r.may('exporting bots and workspaces')
  const start = (e) => {
    e.preventDefault()
    act.run(async () => {
      if (secrets && pass.length < 8) throw new ApiError({ status: 400, type: 'InvalidPayload', message: 'the passphrase needs 8 characters or more' })
      const body = {}
      if (bot) body.botId = bot
      if (secrets) body.passphrase = pass
      const res = await call('POST', '/v1/admin/transfer/exports', { ws, body })
      setJob(res.job)
    })
  }
  const running = job?.status === 'running'
  return html`<section data-test="export">
    <h2>${bot ? 'Export this bot' : 'Export this workspace'}</h2>
    <p class="muted">${bot
      ? 'An archive of the bot: its definition and deployed code, tables and rows, files with their contents, knowledge bases, users, conversations, messages, events, states, tasks and workflows.'
      : 'An archive of every bot of the workspace (as for one bot) and its members with their roles.'}${' '}
      Integrations' configurations go in only when asked, encrypted with a passphrase.</p>
    <${Refused} r=${r} action="exporting bots and workspaces" />
    <form class="row" onSubmit=${start}>
      <label><input type="checkbox" data-test="with-secrets" checked=${secrets} disabled=${!allowed || running} onChange=${(e) => setSecrets(e.target.checked)} /> Include integrations' configurations</label>
      ${secrets && html`<input type="password" data-test="export-passphrase" placeholder="Passphrase (8 characters or more)" autocomplete="new-password" value=${pass} onInput=${(e) => setPass(e.target.value)} />`}
      <button data-test="export-start" disabled=${!allowed || act.busy || running}>${running ? 'Exporting…' : 'Export'}</button>
    </form>
    <${ErrorBox} error=${act.error || error} />
    ${job && html`<${ExportBar} job=${job} />`}
    ${job?.status === 'failed' && html`<div class="error" data-test="export-failed">The export failed: ${job.error}</div>`}
    ${job?.status === 'done' && html`<div class="notice" data-test="export-done">
      <a href=${job.downloadUrl} download data-test="download" data-size=${String(job.bytes)}>Download the archive</a> (${fmtSize(job.bytes)}, ${num(job.entries)} entries${job.secrets ? ', integrations\' configurations sealed with the passphrase' : ''}).
      ${job.export?.notes?.length > 0 && html`<details><summary>Not in the archive</summary><ul>${job.export.notes.map((n) => html`<li>${n}</li>`)}</ul></details>`}
    </div>`}
  </section>`
}

// upload POSTs the archive with the upload's progress (fetch has none).
function upload(ws, file, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest()
    x.open('POST', '/v1/admin/transfer/uploads')
    if (session.token) x.setRequestHeader('Authorization', `Bearer ${session.token}`)
    else if (session.csrf) x.setRequestHeader('X-CSRF-Token', session.csrf)
    x.setRequestHeader('x-workspace-id', ws)
    x.setRequestHeader('Content-Type', 'application/octet-stream')
    x.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total)
    x.onload = () => {
      let data = null
      try { data = JSON.parse(x.responseText) } catch { /* not JSON */ }
      if (x.status >= 200 && x.status < 300 && data?.job) return resolve(data.job)
      reject(new ApiError({ status: x.status, type: data?.type || 'UploadFailed', message: data?.message || `HTTP ${x.status}` }))
    }
    x.onerror = () => reject(new ApiError({ message: 'the upload could not reach the platform' }))
    x.send(file)
  })
}

function Counts({ rep, dry }) {
  const c = [['created', dry ? 'would be created' : 'created'], ['unchanged', 'unchanged'], ['conflicts', 'conflicts (kept as they are)'], ['skipped', 'skipped'], ['failed', 'failed']]
  return html`<table class="list" data-test=${dry ? 'dry-run-report' : 'import-report'}><tbody>
    ${c.map(([k, label]) => html`<tr data-test=${'count-' + k} data-count=${String(rep[k] || 0)}><td>${label}</td><td>${num(rep[k])}</td></tr>`)}
  </tbody></table>
  ${rep.messages?.length > 0 && html`<ul class="conflicts" data-test="import-messages">${rep.messages.map((m) => html`<li>${m}</li>`)}</ul>`}`
}

function ImportPanel({ ws, r }) {
  const act = useAction()
  const { job, setJob, error } = useJob(ws)
  const [file, setFile] = useState(null)
  const [sent, setSent] = useState(null) // upload progress, 0..1
  const [pass, setPass] = useState('')
  const [remap, setRemap] = useState(false)
  const [dry, setDry] = useState(null) // the finished dry run: {remap, report}
  const allowed = r.may('importing archives')
  useEffect(() => {
    if (job?.status === 'done' && job.dryRun && job.import) setDry({ remap: job.remap, report: job.import })
  }, [job])
  if (!allowed) {
    return html`<section data-test="import"><h2>Import an archive</h2><${Refused} r=${r} action="importing archives" /></section>`
  }
  const send = (e) => {
    e.preventDefault()
    act.run(async () => {
      if (!file) throw new ApiError({ status: 400, type: 'InvalidPayload', message: 'choose an archive file first' })
      setDry(null)
      setSent(0)
      setJob(await upload(ws, file, setSent))
    })
  }
  const run = (dryRun) => act.run(async () => {
    const body = { dryRun, remap }
    if (pass) body.passphrase = pass
    const res = await call('POST', `/v1/admin/transfer/jobs/${encodeURIComponent(job.id)}/import`, { ws, body })
    setJob(res.job)
  })
  const running = job?.status === 'running'
  // While a run's start is in flight the bar still shows the job before it
  // (a finished dry run, at 1): it reads 0 until the answer names the run.
  const starting = act.busy && !running
  const v = job && !starting ? (job.status === 'done' ? 1 : job.totalBytes ? job.bytes / job.totalBytes : 0) : 0
  const dryFits = dry && dry.remap === remap
  return html`<section data-test="import">
    <h2>Import an archive</h2>
    <p class="muted">Into this workspace. Ids are kept (so integrations' webhooks, tables and references keep working); a record that exists here and differs is a conflict, reported and left as it is. Running it again changes nothing. Remap gives every record a new id instead: a copy beside the original.</p>
    <form class="row" onSubmit=${send}>
      <input type="file" data-test="import-file" accept=".bfa,.ndjson,application/x-ndjson" onChange=${(e) => { setFile(e.target.files[0] || null); setJob(null); setSent(null); setDry(null) }} />
      <button data-test="import-upload" disabled=${act.busy || running || !file}>Upload</button>
    </form>
    ${sent !== null && html`<div data-test="upload-progress" data-value=${sent.toFixed(4)}><${Progress} value=${sent} label=${`uploaded ${Math.round(sent * 100)}%${file ? ' of ' + fmtSize(file.size) : ''}`} /></div>`}
    <${ErrorBox} error=${act.error || error} />
    ${job && html`<div data-test="archive" data-job=${job.id}>
      <p>Archive of ${job.source?.botId ? html`bot <code>${job.source.botId}</code> of ` : ''}workspace <code>${job.source?.workspaceId}</code>${' '}
        from ${job.source?.apiUrl}, made ${fmtTime(job.source?.createdAt)} (${fmtSize(job.totalBytes)}).
        ${job.secrets ? ' It carries integrations\' configurations: give its passphrase to import them.' : ''}</p>
      <p class="row">
        ${job.secrets && html`<input type="password" data-test="import-passphrase" placeholder="Passphrase" autocomplete="off" value=${pass} onInput=${(e) => setPass(e.target.value)} />`}
        <label><input type="checkbox" data-test="remap" checked=${remap} disabled=${running} onChange=${(e) => setRemap(e.target.checked)} /> Remap ids (a copy with new ids)</label>
        <button data-test="dry-run" disabled=${act.busy || running} onClick=${() => run(true)}>Dry run</button>
        <button data-test="import-start" class="primary" disabled=${act.busy || running || !dryFits} title=${dryFits ? '' : 'Run a dry run first (with the same remap choice)'} onClick=${() => run(false)}>Import</button>
      </p>
      ${(running || job.status === 'done' || job.status === 'failed') && job.status !== 'uploaded' && html`<div data-test="import-progress" data-value=${v.toFixed(4)} data-status=${job.status} data-dry=${String(job.dryRun)}>
        <${Progress} value=${v} label=${starting ? 'starting…' : `${job.dryRun ? 'dry run: ' : ''}${num(job.entries)} entries, ${fmtSize(job.bytes)} of ${fmtSize(job.totalBytes)}`} /></div>`}
      ${job.status === 'failed' && html`<div class="error" data-test="import-failed">The ${job.dryRun ? 'dry run' : 'import'} failed: ${job.error}</div>`}
      ${dry && html`<h3>Dry run: what would change${dry.remap ? ' (remapped)' : ''}</h3><${Counts} rep=${dry.report} dry=${true} />`}
      ${job.status === 'done' && !job.dryRun && job.import && html`<h3 data-test="import-done">Imported</h3><${Counts} rep=${job.import} dry=${false} />`}
    </div>`}
  </section>`
}

export function Transfer({ ws, bot }) {
  const r = useRole(ws)
  return html`<h1>${bot ? 'Export' : 'Export and import'}</h1>
    <${ExportPanel} ws=${ws} bot=${bot} r=${r} />
    ${bot
      ? html`<p class="muted">To import an archive, open the workspace's <a href=${`#/w/${encodeURIComponent(ws)}/transfer`}>Export and import</a> page.</p>`
      : html`<${ImportPanel} ws=${ws} r=${r} />`}`
}
