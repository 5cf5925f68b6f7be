// app.js: the console's entry point: sign-in, the layout and the routes
// (in the URL's fragment, #/..., so the platform serves one page at "/").
import { call, session } from './api.js'
import { html, render, useState, useEffect, useLoad, Loaded, ErrorBox, go, errText } from './ui.js'
import { Workspaces, Workspace, Members, Tokens, BotPage } from './admin.js'
import { Emulator } from './emulator.js'
import { Conversations, Conversation, Users, States, Tables, TableGrid, Files, Logs, Issues } from './data.js'
import { Health, BotMetrics } from './health.js'

function parseRoute() {
  const parts = (location.hash.replace(/^#\/?/, '') || '').split('/').filter(Boolean).map(decodeURIComponent)
  return parts
}

function SignIn({ onSignedIn, reason }) {
  const [token, setToken] = useState('')
  const [error, setError] = useState(reason || null)
  const [busy, setBusy] = useState(false)
  const submit = async (e) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const r = await call('GET', '/v1/admin/account/me', { token: token.trim() })
      session.token = token.trim()
      onSignedIn(r.account)
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return html`<main class="signin">
    <h1>Bot platform console</h1>
    <form onSubmit=${submit} data-test="signin">
      <label for="token">Personal access token</label>
      <input id="token" name="token" type="password" autocomplete="off" required value=${token} onInput=${(e) => setToken(e.target.value)} />
      <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
      <p class="muted">Locally, the first account's token is in <code>.data/admin-token</code>. It is kept in this tab only (sessionStorage) and forgotten when the tab closes.</p>
    </form>
    <${ErrorBox} error=${error} />
  </main>`
}

function Nav({ route, account, onSignOut }) {
  const [ws, wsId, b, botId] = route
  const inBot = ws === 'w' && b === 'b' && botId
  const base = inBot ? `/w/${wsId}/b/${botId}` : ''
  const link = (r, label) => html`<a href=${'#' + r} class=${'#' + r === location.hash ? 'active' : ''}>${label}</a>`
  return html`<header class="top">
    <a class="brand" href="#/">Bot platform</a>
    <nav>
      ${link('/', 'Workspaces')}
      ${ws === 'w' && wsId && link(`/w/${wsId}`, 'Bots')}
      ${ws === 'w' && wsId && link(`/w/${wsId}/members`, 'Members')}
      ${link('/tokens', 'Tokens')}
      ${link('/health', 'Health')}
    </nav>
    <span class="who">${account?.email} <button class="link" onClick=${onSignOut}>Sign out</button></span>
    ${inBot && html`<nav class="sub" data-test="bot-nav">
      ${link(base, 'Overview')} ${link(base + '/emulator', 'Emulator')} ${link(base + '/conversations', 'Conversations')}
      ${link(base + '/users', 'Users')} ${link(base + '/states', 'States')} ${link(base + '/tables', 'Tables')}
      ${link(base + '/files', 'Files')} ${link(base + '/logs', 'Logs')} ${link(base + '/issues', 'Issues')} ${link(base + '/metrics', 'Metrics')}
    </nav>`}
  </header>`
}

function Page({ route }) {
  const [a, ws, b, bot, section, item] = route
  if (a === 'tokens') return html`<${Tokens} />`
  if (a === 'health') return html`<${Health} />`
  if (a !== 'w' || !ws) return html`<${Workspaces} />`
  if (b === 'members') return html`<${Members} ws=${ws} />`
  if (b !== 'b' || !bot) return html`<${Workspace} ws=${ws} />`
  const p = { ws, bot }
  switch (section) {
    case 'emulator': return html`<${Emulator} ...${p} />`
    case 'conversations': return item ? html`<${Conversation} ...${p} id=${item} />` : html`<${Conversations} ...${p} />`
    case 'users': return html`<${Users} ...${p} />`
    case 'states': return html`<${States} ...${p} />`
    case 'tables': return item ? html`<${TableGrid} ...${p} name=${item} />` : html`<${Tables} ...${p} />`
    case 'files': return html`<${Files} ...${p} />`
    case 'logs': return html`<${Logs} ...${p} />`
    case 'metrics': return html`<${BotMetrics} ...${p} />`
    case 'issues': return html`<${Issues} ...${p} />`
    default: return html`<${BotPage} ...${p} />`
  }
}

function App() {
  const [route, setRoute] = useState(parseRoute())
  const [account, setAccount] = useState(null)
  const [checked, setChecked] = useState(!session.token)
  const [reason, setReason] = useState(null)
  useEffect(() => {
    const on = () => setRoute(parseRoute())
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  useEffect(() => {
    if (!session.token) return
    call('GET', '/v1/admin/account/me').then(
      (r) => { setAccount(r.account); setChecked(true) },
      (e) => { if (e.status === 401) session.token = ''; setReason(e); setChecked(true) },
    )
  }, [])
  useEffect(() => {
    const [a, ws, b, bot, section, item] = route
    document.title = ['Console', a === 'w' && ws, bot, section, item].filter(Boolean).join(' · ')
  }, [route])
  if (!checked) return html`<p class="muted pad">Loading…</p>`
  if (!account) {
    return html`<${SignIn} reason=${reason} onSignedIn=${(acc) => { setReason(null); setAccount(acc) }} />`
  }
  const signOut = () => { session.token = ''; setAccount(null); go('/') }
  return html`<${Nav} route=${route} account=${account} onSignOut=${signOut} />
    <main class="page"><${Page} route=${route} key=${route.join('/')} /></main>`
}

// The page's "Loading…" placeholder goes: Preact renders into an empty root.
const root = document.getElementById('app')
root.textContent = ''
render(html`<${App} />`, root)
