// admin.js: workspaces, members and roles, personal access tokens, bots
// and a bot's page (Admin API).
import { call, all } from './api.js'
import { html, useState, useEffect, useLoad, Loaded, ErrorBox, Empty, useAction, Json, Status, fmtTime, go } from './ui.js'
import { useRole, Refused } from './role.js'
import { WorkspaceSettings, Billing, BotKeys, IntegrationSwitch } from './settings.js'

const ROLES = ['viewer', 'billing', 'developer', 'manager', 'administrator', 'owner']

export function Workspaces() {
  const st = useLoad(() => all('GET', '/v1/admin/workspaces', 'workspaces'), [])
  const [name, setName] = useState('')
  const act = useAction()
  const create = (e) => {
    e.preventDefault()
    act.run(async () => {
      const w = await call('POST', '/v1/admin/workspaces', { body: { name } })
      go(`/w/${w.id}`)
    })
  }
  return html`<h1>Workspaces</h1>
    <form class="row" onSubmit=${create} data-test="create-workspace">
      <input placeholder="New workspace name" required value=${name} onInput=${(e) => setName(e.target.value)} />
      <button disabled=${act.busy}>Create workspace</button>
    </form>
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(list) => list.length === 0
      ? html`<${Empty}>You are in no workspace yet: create one above, then a bot in it.</${Empty}>`
      : html`<table class="list"><thead><tr><th>Name</th><th>Id</th><th>Bots</th><th>Created</th></tr></thead><tbody>
          ${list.map((w) => html`<tr><td><a href=${`#/w/${w.id}`}>${w.name}</a></td><td><code>${w.id}</code></td><td>${w.botCount}</td><td>${fmtTime(w.createdAt)}</td></tr>`)}
        </tbody></table>`}</${Loaded}>`
}

export function Workspace({ ws }) {
  const wst = useLoad(() => call('GET', `/v1/admin/workspaces/${ws}`, { ws }), [ws])
  const st = useLoad(() => all('GET', '/v1/admin/bots', 'bots', { ws }), [ws])
  const [name, setName] = useState('')
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may('creating bots')
  const create = (e) => {
    e.preventDefault()
    act.run(async () => {
      const { bot } = await call('POST', '/v1/admin/bots', { ws, body: name ? { name } : {} })
      go(`/w/${ws}/b/${bot.id}`)
    })
  }
  return html`<h1>${wst.data?.name || 'Workspace'} <small><code>${ws}</code></small></h1>
    <${ErrorBox} error=${wst.error} />
    <h2>Bots</h2>
    <form class="row" onSubmit=${create} data-test="create-bot">
      <input placeholder="New bot name (optional)" value=${name} onInput=${(e) => setName(e.target.value)} disabled=${off} />
      <button disabled=${act.busy || off}>Create bot</button>
    </form>
    <${Refused} r=${r} action="creating bots" />
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(bots) => bots.length === 0
      ? html`<${Empty}>No bot in this workspace: create one above, or deploy one with the CLI (<code>bp deploy --createNewBot</code>).</${Empty}>`
      : html`<table class="list"><thead><tr><th>Name</th><th>Id</th><th>Deployed</th><th>Updated</th></tr></thead><tbody>
          ${bots.map((b) => html`<tr><td><a href=${`#/w/${ws}/b/${b.id}`}>${b.name || '(unnamed)'}</a></td><td><code>${b.id}</code></td><td>${fmtTime(b.deployedAt) || '—'}</td><td>${fmtTime(b.updatedAt)}</td></tr>`)}
        </tbody></table>`}</${Loaded}>
    <${WorkspaceSettings} ws=${ws} /><${Billing} ws=${ws} />`
}

export function Members({ ws }) {
  const st = useLoad(() => all('GET', '/v1/admin/workspace-members', 'members', { ws }), [ws])
  const [email, setEmail] = useState('')
  const [role, setRole] = useState('developer')
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may('managing members')
  // An invitation (auth.js) adds a member: list it without a reload.
  useEffect(() => {
    const changed = () => st.reload()
    window.addEventListener('members-changed', changed)
    return () => window.removeEventListener('members-changed', changed)
  }, [ws])
  const invite = (e) => {
    e.preventDefault()
    act.run(async () => {
      await call('POST', '/v1/admin/workspace-members', { ws, body: { email, role } })
      setEmail('')
      st.reload()
    })
  }
  const setMemberRole = (m, r) => act.run(async () => { await call('PUT', `/v1/admin/workspace-members/${m.id}`, { ws, body: { role: r } }); st.reload() })
  const remove = (m) => confirm(`Remove ${m.email} from this workspace?`) && act.run(async () => { await call('DELETE', `/v1/admin/workspace-members/${m.id}`, { ws }); st.reload() })
  return html`<h1>Members</h1>
    <form class="row" onSubmit=${invite} data-test="invite">
      <input type="email" placeholder="email@example.com" required value=${email} onInput=${(e) => setEmail(e.target.value)} disabled=${off} />
      <select value=${role} onChange=${(e) => setRole(e.target.value)} disabled=${off}>${ROLES.map((r) => html`<option>${r}</option>`)}</select>
      <button disabled=${act.busy || off}>Add member</button>
    </form>
    <${Refused} r=${r} action="managing members" />
    <p class="muted">Locally, a new account's first token is written to <code>${'.data/account-tokens/<email>'}</code>.</p>
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(members) => html`<table class="list" data-test="members"><thead><tr><th>Email</th><th>Role</th><th>Since</th><th></th></tr></thead><tbody>
      ${members.map((m) => html`<tr><td>${m.email}</td>
        <td><select value=${m.role} onChange=${(e) => setMemberRole(m, e.target.value)} disabled=${off}>${ROLES.map((r) => html`<option>${r}</option>`)}</select></td>
        <td>${fmtTime(m.createdAt)}</td><td>${m.id === r.me
          ? html`<button class="link danger" onClick=${() => remove(m)}>Leave</button>`
          : html`<button class="link danger" onClick=${() => remove(m)} disabled=${off}>Remove</button>`}</td></tr>`)}
    </tbody></table>`}</${Loaded}>`
}

export function Tokens() {
  const st = useLoad(() => call('GET', '/v1/admin/account/pats').then((r) => r.pats), [])
  const [note, setNote] = useState('')
  const [created, setCreated] = useState(null)
  const act = useAction()
  const create = (e) => {
    e.preventDefault()
    act.run(async () => {
      const { pat } = await call('POST', '/v1/admin/account/pats', { body: { note } })
      setCreated(pat)
      setNote('')
      st.reload()
    })
  }
  const revoke = (p) => confirm('Revoke this token? Anything using it stops working.') && act.run(async () => { await call('DELETE', `/v1/admin/account/pats/${p.id}`); st.reload() })
  return html`<h1>Personal access tokens</h1>
    <form class="row" onSubmit=${create} data-test="create-token">
      <input placeholder="Note (what the token is for)" required value=${note} onInput=${(e) => setNote(e.target.value)} />
      <button disabled=${act.busy}>Create token</button>
    </form>
    ${created && html`<div class="notice" data-test="token-value">New token (shown once, copy it now): <code class="secret">${created.value}</code>
      <button class="link" onClick=${() => setCreated(null)}>Done</button></div>`}
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(pats) => pats.length === 0 ? html`<${Empty}>No token.</${Empty}>` : html`<table class="list"><thead><tr><th>Note</th><th>Id</th><th>Created</th><th></th></tr></thead><tbody>
      ${pats.map((p) => html`<tr><td>${p.note}</td><td><code>${p.id}</code></td><td>${fmtTime(p.createdAt)}</td><td><button class="link danger" onClick=${() => revoke(p)}>Revoke</button></td></tr>`)}
    </tbody></table>`}</${Loaded}>`
}

// BotUrl sets where the platform delivers the bot's events (updateBot
// {url}): a bot running on the developer's machine, for instance.
function BotUrl({ ws, b }) {
  const [url, setUrl] = useState('')
  const [saved, setSaved] = useState(null)
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may("changing a bot's url")
  const save = (e) => {
    e.preventDefault()
    act.run(async () => {
      await call('PUT', `/v1/admin/bots/${b.id}`, { ws, body: { url: url.trim() || null } })
      setSaved(url.trim())
    })
  }
  return html`<h2>Endpoint</h2>
    <p class="muted">Where the platform delivers this bot's events, for a bot running on your machine (the API does not show a bot's url back; deployed code needs none).</p>
    <form class="row" onSubmit=${save} data-test="bot-url">
      <input type="url" placeholder="http://127.0.0.1:8075" value=${url} onInput=${(e) => setUrl(e.target.value)} aria-label="Bot url" disabled=${off} />
      <button class="secondary" disabled=${act.busy || off}>Save url</button>
    </form>
    <${Refused} r=${r} action="changing a bot's url" />
    ${saved !== null && html`<div class="notice" data-test="bot-url-saved">${saved ? `Events now go to ${saved}.` : 'The url is cleared.'}</div>`}
    <${ErrorBox} error=${act.error} />`
}

// BotVersions lists the bot's saved versions (snapshots of its definition
// and code), saves the current one and deploys a saved one back.
function BotVersions({ ws, bot }) {
  const st = useLoad(() => call('GET', `/v1/admin/bots/${bot}/versions`, { ws }).then((r) => r.versions), [ws, bot])
  const [name, setName] = useState('')
  const [done, setDone] = useState(null)
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may('saving and deploying versions')
  const save = (e) => {
    e.preventDefault()
    act.run(async () => {
      const { version } = await call('POST', `/v1/admin/bots/${bot}/versions`, { ws, body: { name: name.trim() } })
      setName('')
      setDone(`Saved version ${version.name}.`)
      st.reload()
    })
  }
  const deploy = (v) => confirm(`Make version ${v.name} the bot's definition and code?`) && act.run(async () => {
    await call('POST', `/v1/admin/bots/${bot}/versions/deploy`, { ws, body: { versionId: v.id } })
    setDone(`Deployed version ${v.name}.`)
  })
  return html`<h3>Versions</h3>
    <form class="row" onSubmit=${save} data-test="save-version">
      <input placeholder="Version name" required value=${name} onInput=${(e) => setName(e.target.value)} aria-label="Version name" disabled=${off} />
      <button class="secondary" disabled=${act.busy || off}>Save the current definition</button>
    </form>
    <${Refused} r=${r} action="saving and deploying versions" />
    ${done && html`<div class="notice" data-test="version-done">${done}</div>`}
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(vs) => vs.length === 0 ? html`<${Empty}>No saved version: save one above to roll back to it later.</${Empty}>`
      : html`<table class="list" data-test="versions"><thead><tr><th>Name</th><th>Id</th><th>Description</th><th></th></tr></thead><tbody>
        ${vs.map((v) => html`<tr><td>${v.name}</td><td><code>${v.id}</code></td><td>${v.description || ''}</td><td><button class="link" onClick=${() => deploy(v)} disabled=${off}>Deploy</button></td></tr>`)}
      </tbody></table>`}</${Loaded}>`
}

export function BotPage({ ws, bot }) {
  const st = useLoad(() => call('GET', `/v1/admin/bots/${bot}`, { ws }).then((r) => r.bot), [ws, bot])
  const r = useRole(ws)
  return html`<${Loaded} st=${st}>${(b) => html`
    <h1>${b.name || 'Bot'} <small><code>${b.id}</code></small></h1>
    <dl class="facts">
      <dt>Status</dt><dd><${Status} value=${b.status} /></dd>
      <dt>Dev</dt><dd>${String(!!b.dev)}</dd>
      <dt>Deployed</dt><dd>${fmtTime(b.deployedAt) || '—'}</dd>
      <dt>Updated</dt><dd>${fmtTime(b.updatedAt)}</dd>
    </dl>
    <${BotUrl} ws=${ws} b=${b} />
    <p><a class="button" href=${`#/w/${ws}/b/${bot}/emulator`}>Open the emulator</a></p>
    <h2>Integrations</h2>
    ${Object.keys(b.integrations || {}).length === 0
      ? html`<${Empty}>No integration installed. The emulator needs none: it talks on the platform's built-in channel.</${Empty}>`
      : html`<table class="list" data-test="integrations"><thead><tr><th>Alias / name</th><th>Version</th><th>Enabled</th><th>Status</th><th>Reason</th><th></th></tr></thead><tbody>
        ${Object.entries(b.integrations).map(([k, i]) => html`<tr><td>${i.name}${i.alias && i.alias !== i.name ? ` (${i.alias})` : ''}<br/><code class="muted">${k}</code></td><td>${i.version}</td><td>${String(i.enabled)}</td><td><${Status} value=${i.status} /></td><td>${i.statusReason || ''}</td><td><${IntegrationSwitch} ws=${ws} bot=${bot} id=${k} i=${i} onChanged=${st.reload} /></td></tr>`)}
      </tbody></table>
      <${Refused} r=${r} action="changing integrations" />`}
    <h2>Recurring events</h2>
    ${Object.keys(b.recurringEvents || {}).length === 0 ? html`<${Empty}>No recurring event.</${Empty}>`
      : html`<table class="list"><thead><tr><th>Name</th><th>Schedule</th><th>Type</th><th>Failures</th></tr></thead><tbody>
        ${Object.entries(b.recurringEvents).map(([k, r]) => html`<tr><td>${k}</td><td><code>${r.schedule?.cron}</code></td><td>${r.type}</td><td>${r.failedAttempts ?? 0}${r.lastFailureReason ? ': ' + r.lastFailureReason : ''}</td></tr>`)}
      </tbody></table>`}
    <h2>Deployments</h2>
    ${b.deployedAt
      ? html`<p data-test="deployed">Code deployed ${fmtTime(b.deployedAt)} (the platform runs it when the bot has no url).</p>`
      : html`<${Empty}>No code deployed. Deploy with the official CLI: <code>bp deploy --botId ${b.id}</code>, or set an endpoint above for a bot running elsewhere.</${Empty}>`}
    <${BotVersions} ws=${ws} bot=${bot} />
    <${BotKeys} ws=${ws} bot=${bot} />
    <details><summary>Definition (JSON)</summary><${Json} value=${b} /></details>
  `}</${Loaded}>`
}
