// backups.js: the Backups page (#/backups) of the local platform
// (docs/backup.md): the data directory's backups with their sizes, "Back up
// now", and a restore button. A running platform's stores cannot be
// swapped under it, so a restore is staged: the platform restores it at its
// next start (the page says so, and the stage can be cancelled). Only the
// platform's operator (its first account) may use it; on AWS the API says
// that the table's point-in-time recovery and the bucket's versions are the
// backups, and the page shows that.
import { call } from './api.js'
import { html, useState, useLoad, useAction, Loaded, ErrorBox, Empty, fmtTime } from './ui.js'

export function fmtSize(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(1) + ' GiB'
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB'
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + ' KiB'
  return n + ' B'
}

export function Backups() {
  const st = useLoad(() => call('GET', '/v1/admin/backups'), [])
  const act = useAction()
  const [asked, setAsked] = useState('') // the backup whose restore awaits confirmation
  const [taken, setTaken] = useState(null)
  const take = () => act.run(async () => {
    const { backup } = await call('POST', '/v1/admin/backups')
    setTaken(backup)
    st.reload()
  })
  const restore = (name) => act.run(async () => {
    await call('POST', `/v1/admin/backups/${encodeURIComponent(name)}/restore`)
    setAsked('')
    st.reload()
  })
  const cancel = () => act.run(async () => { await call('DELETE', '/v1/admin/backups/restore'); st.reload() })
  return html`<h1>Backups</h1>
    <${Loaded} st=${st}>${(s) => html`
      <p class="muted" data-test="backup-settings">Kept in <code>${s.dir}</code>.
        ${s.every ? ` A backup is taken every ${s.every}.` : ' No schedule (serve --backup-every sets one).'}
        ${s.keep ? ` The newest ${s.keep} are kept.` : ' All are kept.'}</p>
      ${s.pendingRestore && html`<div class="notice" data-test="pending-restore">
        <strong>${s.pendingRestore}</strong> will be restored when the platform next starts: stop it and start it again
        (until then nothing changes; what the data directory holds now is kept aside, not deleted).
        <button class="link" data-test="cancel-restore" disabled=${act.busy} onClick=${cancel}>Cancel the restore</button></div>`}
      <div class="row"><button data-test="backup-now" disabled=${act.busy} onClick=${take}>${act.busy ? 'Working…' : 'Back up now'}</button></div>
      ${taken && html`<div class="notice" data-test="backup-taken">Backup <code>${taken.name}</code> taken (${fmtSize(taken.size)}).</div>`}
      <${ErrorBox} error=${act.error} />
      ${s.backups.length === 0 ? html`<${Empty}>No backup yet.</${Empty}>` : html`<table class="list" data-test="backups"><thead><tr><th>Backup</th><th>Taken</th><th>Size</th><th>Files</th><th>By</th><th></th></tr></thead><tbody>
        ${s.backups.map((b) => html`<tr data-test="backup" data-name=${b.name} data-size=${String(b.size)}>
          <td><code>${b.name}</code></td><td>${fmtTime(b.createdAt)}</td><td data-test="size">${fmtSize(b.size)}</td><td>${b.objects}</td><td>${b.scheduled ? 'schedule' : 'hand'}</td>
          <td>${asked === b.name
            ? html`<span data-test="confirm-restore">Restore this backup at the next start? <button class="danger" data-test="confirm" disabled=${act.busy} onClick=${() => restore(b.name)}>Restore</button> <button class="link" onClick=${() => setAsked('')}>No</button></span>`
            : html`<button class="link" data-test="restore" onClick=${() => setAsked(b.name)}>Restore…</button>`}</td>
        </tr>`)}
      </tbody></table>`}`}</${Loaded}>`
}
