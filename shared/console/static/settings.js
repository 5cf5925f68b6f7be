// settings.js: a workspace's settings (name, deletion) and billing (the
// AI spending limit, invoices), a bot's API keys and its integrations'
// on/off switch, each with the role-aware controls of role.js: below an
// action's least role the control is off and says why, and what the role
// may not even read is not asked for (a refused load would be a failed
// request in the browser's console). The API still decides every call.
import { call } from './api.js'
import { html, useState, useLoad, Loaded, ErrorBox, Empty, useAction, fmtTime, go } from './ui.js'
import { useRole, Refused } from './role.js'

// loadIf loads only once the role is known and allows action.
function useLoadIf(r, action, load, deps) {
  const ok = r.known && r.may(action)
  return useLoad(() => (ok ? load() : Promise.resolve(null)), [ok, ...deps])
}

// WorkspaceSettings renames (updateWorkspace: administrator) and deletes
// (deleteWorkspace: owner) the workspace.
export function WorkspaceSettings({ ws }) {
  const st = useLoad(() => call('GET', `/v1/admin/workspaces/${ws}`, { ws }), [ws])
  const r = useRole(ws)
  const [name, setName] = useState('')
  const [done, setDone] = useState(null)
  const act = useAction()
  const offName = !r.may('changing workspace settings')
  const offDelete = !r.may('deleting the workspace')
  const rename = (e) => {
    e.preventDefault()
    act.run(async () => {
      await call('PUT', `/v1/admin/workspaces/${ws}`, { ws, body: { name: name.trim() } })
      setDone(`Renamed to ${name.trim()}.`)
      setName('')
      st.reload()
    })
  }
  const remove = () => confirm('Delete this workspace, its bots and everything in them?') && act.run(async () => {
    await call('DELETE', `/v1/admin/workspaces/${ws}`, { ws })
    go('/')
  })
  return html`<h2>Settings</h2>
    <form class="row" onSubmit=${rename} data-test="workspace-settings">
      <input placeholder=${st.data?.name || 'Workspace name'} required value=${name} onInput=${(e) => setName(e.target.value)} aria-label="Workspace name" disabled=${offName} />
      <button class="secondary" disabled=${act.busy || offName}>Rename</button>
      <button type="button" class="danger secondary" data-test="delete-workspace" disabled=${act.busy || offDelete} onClick=${remove}>Delete workspace</button>
    </form>
    <${Refused} r=${r} action="changing workspace settings" />
    ${!offName && html`<${Refused} r=${r} action="deleting the workspace" />`}
    ${done && html`<div class="notice">${done}</div>`}
    <${ErrorBox} error=${act.error} />`
}

// Billing shows the upcoming invoice and the invoices, and sets the
// workspace's monthly AI spending limit: all need the billing role.
export function Billing({ ws }) {
  const r = useRole(ws)
  const st = useLoadIf(r, 'seeing and changing billing', async () => {
    const [up, inv, w] = await Promise.all([
      call('GET', `/v1/admin/workspaces/${ws}/billing/upcoming-invoice`, { ws }),
      call('GET', `/v1/admin/workspaces/${ws}/billing/invoices`, { ws }),
      call('GET', `/v1/admin/workspaces/${ws}`, { ws }),
    ])
    return { up, invoices: inv.invoices || [], limit: w.spendingLimit }
  }, [ws])
  const [limit, setLimit] = useState('')
  const [done, setDone] = useState(null)
  const act = useAction()
  const off = !r.may('seeing and changing billing')
  const save = (e) => {
    e.preventDefault()
    act.run(async () => {
      await call('PUT', '/v1/admin/quotas/ai-spend', { ws, body: { monthlySpendingLimit: Number(limit) } })
      setDone(`The monthly AI spending limit is now ${Number(limit)}.`)
      setLimit('')
      st.reload()
    })
  }
  return html`<h2>Billing</h2>
    <form class="row" onSubmit=${save} data-test="ai-spend">
      <input type="number" min="0" step="any" required placeholder=${st.data ? `AI spending limit (now ${st.data.limit})` : 'Monthly AI spending limit'} value=${limit} onInput=${(e) => setLimit(e.target.value)} aria-label="Monthly AI spending limit" disabled=${off} />
      <button class="secondary" disabled=${act.busy || off}>Set the limit</button>
    </form>
    <${Refused} r=${r} action="seeing and changing billing" />
    ${done && html`<div class="notice">${done}</div>`}
    <${ErrorBox} error=${act.error} />
    ${!off && html`<${Loaded} st=${st}>${(d) => d && html`<p data-test="upcoming-invoice">Upcoming invoice: ${d.up.total ?? 0}. ${d.invoices.length === 0 ? 'No invoice yet.' : `${d.invoices.length} invoices.`}</p>`}</${Loaded}>`}`
}

// BotKeys lists, creates and deletes a bot's API keys (developer: a
// viewer is not shown them at all, the list needs developer too).
export function BotKeys({ ws, bot }) {
  const r = useRole(ws)
  const st = useLoadIf(r, 'managing bot API keys', () => call('GET', '/v1/admin/bots/baks', { ws, query: { botId: bot } }).then((x) => x.baks || []), [ws, bot])
  const [note, setNote] = useState('')
  const [created, setCreated] = useState(null)
  const act = useAction()
  const off = !r.may('managing bot API keys')
  const create = (e) => {
    e.preventDefault()
    act.run(async () => {
      setCreated(await call('POST', '/v1/admin/bots/baks', { ws, body: { botId: bot, note } }))
      setNote('')
      st.reload()
    })
  }
  const revoke = (k) => confirm('Delete this key? Anything using it stops working.') && act.run(async () => { await call('DELETE', `/v1/admin/bots/baks/${k.id}`, { ws }); st.reload() })
  return html`<h2>API keys</h2>
    <form class="row" onSubmit=${create} data-test="create-bak">
      <input placeholder="Note (what the key is for)" value=${note} onInput=${(e) => setNote(e.target.value)} aria-label="Key note" disabled=${off} />
      <button class="secondary" disabled=${act.busy || off}>Create key</button>
    </form>
    <${Refused} r=${r} action="managing bot API keys" />
    ${created && html`<div class="notice" data-test="bak-value">New key (shown once, copy it now): <code class="secret">${created.value}</code>
      <button class="link" onClick=${() => setCreated(null)}>Done</button></div>`}
    <${ErrorBox} error=${act.error} />
    ${!off && html`<${Loaded} st=${st}>${(keys) => keys && (keys.length === 0 ? html`<${Empty}>No API key for this bot.</${Empty}>` : html`<table class="list" data-test="baks"><thead><tr><th>Note</th><th>Id</th><th>Created</th><th></th></tr></thead><tbody>
      ${keys.map((k) => html`<tr><td>${k.note || ''}</td><td><code>${k.id}</code></td><td>${fmtTime(k.createdAt)}</td><td><button class="link danger" onClick=${() => revoke(k)}>Delete</button></td></tr>`)}
    </tbody></table>`)}</${Loaded}>`}`
}

// IntegrationSwitch turns an installed integration on or off (updateBot:
// developer; only enabled is sent: the configuration stays); onChanged
// reloads the bot.
export function IntegrationSwitch({ ws, bot, id, i, onChanged }) {
  const r = useRole(ws)
  const act = useAction()
  const off = !r.may('changing integrations')
  const flip = () => act.run(async () => {
    await call('PUT', `/v1/admin/bots/${bot}`, { ws, body: { integrations: { [id]: { enabled: !i.enabled } } } })
    onChanged()
  })
  return html`<button class="link" data-test="integration-switch" disabled=${act.busy || off} title=${off ? r.why('changing integrations') : ''} onClick=${flip}>${i.enabled ? 'Disable' : 'Enable'}</button>${act.error && html`<div class="why">${act.error.message}</div>`}`
}
