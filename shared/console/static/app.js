// app.js: the console's entry point: sign-in, the layout and the routes
// (in the URL's fragment, #/..., so the platform serves one page at "/").
import { call, session } from './api.js'
import { html, render, useState, useEffect, useLoad, Loaded, ErrorBox, go, errText } from './ui.js'
import { Workspaces, Workspace, Members, Tokens, BotPage } from './admin.js'
import { Emulator } from './emulator.js'
import { Inbox, InboxLink } from './inbox.js'
import { SignIn, LinkPage, Account, Invitations, restore, signOut } from './auth.js'
import { Conversations, Conversation, Users, States, Tables, TableGrid, Files, Logs, Issues } from './data.js'
import { Health, BotMetrics } from './health.js'
import { NewAssistant, AssistantSettings, AssistantLink } from './assistant.js'
import { Backups } from './backups.js'
import { Transfer } from './transfer.js'
import { useRole } from './role.js'

function parseRoute() {
  const parts = (location.hash.replace(/^#\/?/, '') || '').split('/').filter(Boolean).map(decodeURIComponent)
  return parts
}

// NewAssistantNavLink shows "New assistant" only to a role that may
// create a bot (role.js), once the role is known.
function NewAssistantNavLink({ ws, link }) {
  const r = useRole(ws)
  return r.known && r.may('creating and changing assistants') ? link(`/w/${ws}/assistant/new`, 'New assistant') : null
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
      ${ws === 'w' && wsId && html`<${NewAssistantNavLink} ws=${wsId} link=${link} />`}
      ${ws === 'w' && wsId && html`<${InboxLink} ws=${wsId} />`}
      ${ws === 'w' && wsId && link(`/w/${wsId}/transfer`, 'Export/import')}
      ${link('/tokens', 'Tokens')}
      ${link('/account', 'Account')}
      ${link('/health', 'Health')}
      ${link('/backups', 'Backups')}
    </nav>
    <span class="who">${account?.email} <button class="link" onClick=${onSignOut}>Sign out</button></span>
    ${inBot && html`<nav class="sub" data-test="bot-nav">
      ${link(base, 'Overview')} <${AssistantLink} ws=${wsId} bot=${botId} /> ${link(base + '/emulator', 'Emulator')} ${link(base + '/conversations', 'Conversations')}
      ${link(base + '/users', 'Users')} ${link(base + '/states', 'States')} ${link(base + '/tables', 'Tables')}
      ${link(base + '/files', 'Files')} ${link(base + '/logs', 'Logs')} ${link(base + '/issues', 'Issues')} ${link(base + '/metrics', 'Metrics')} ${link(base + '/transfer', 'Export')}
    </nav>`}
  </header>`
}

function Page({ route, account, onSignedOut }) {
  const [a, ws, b, bot, section, item] = route
  if (a === 'tokens') return html`<${Tokens} />`
  if (a === 'account') return html`<${Account} account=${account} onSignedOut=${onSignedOut} />`
  if (a === 'health') return html`<${Health} />`
  if (a === 'backups') return html`<${Backups} />`
  if (a !== 'w' || !ws) return html`<${Workspaces} />`
  if (b === 'members') return html`<${Members} ws=${ws} /><${Invitations} ws=${ws} />`
  if (b === 'inbox') return html`<${Inbox} ws=${ws} id=${bot} />`
  if (b === 'assistant') return html`<${NewAssistant} ws=${ws} />`
  if (b === 'transfer') return html`<${Transfer} ws=${ws} />`
  if (b !== 'b' || !bot) return html`<${Workspace} ws=${ws} />`
  const p = { ws, bot }
  switch (section) {
    case 'emulator': return html`<${Emulator} ...${p} />`
    case 'assistant': return html`<${AssistantSettings} ...${p} />`
    case 'conversations': return item ? html`<${Conversation} ...${p} id=${item} />` : html`<${Conversations} ...${p} />`
    case 'users': return html`<${Users} ...${p} />`
    case 'states': return html`<${States} ...${p} />`
    case 'tables': return item ? html`<${TableGrid} ...${p} name=${item} />` : html`<${Tables} ...${p} />`
    case 'files': return html`<${Files} ...${p} />`
    case 'logs': return html`<${Logs} ...${p} />`
    case 'metrics': return html`<${BotMetrics} ...${p} />`
    case 'issues': return html`<${Issues} ...${p} />`
    case 'transfer': return html`<${Transfer} ...${p} />`
    default: return html`<${BotPage} ...${p} />`
  }
}

function App() {
  const [route, setRoute] = useState(parseRoute())
  const [account, setAccount] = useState(null)
  const [checked, setChecked] = useState(false)
  const [reason, setReason] = useState(null)
  useEffect(() => {
    const on = () => setRoute(parseRoute())
    addEventListener('hashchange', on)
    return () => removeEventListener('hashchange', on)
  }, [])
  useEffect(() => {
    // The signed-in account: the pasted token's, or the browser session's
    // (auth.js); none: the sign-in page.
    restore().then(
      (acc) => { setAccount(acc); setChecked(true) },
      (e) => {
        if (e.status === 401) { session.token = ''; session.csrf = '' }
        if (e.status !== 401 || session.token) setReason(e)
        setChecked(true)
      },
    )
  }, [])
  useEffect(() => {
    const [a, ws, b, bot, section, item] = route
    document.title = ['Console', a === 'w' && ws, bot, section, item].filter(Boolean).join(' · ')
  }, [route])
  if (!checked) return html`<p class="muted pad">Loading…</p>`
  const signedIn = (acc) => { setReason(null); setAccount(acc) }
  // Setup and invitation links open without a session.
  if (route[0] === 'setup' || route[0] === 'invite') {
    return html`<${LinkPage} token=${route[1]} kind=${route[0] === 'setup' ? 'setup' : 'invitation'} key=${route[1]} onSignedIn=${signedIn} />`
  }
  const onSignedOut = (why) => { session.token = ''; session.csrf = ''; setReason(why); setAccount(null); go('/') }
  if (!account) {
    return html`<${SignIn} reason=${reason} onSignedIn=${(acc) => { signedIn(acc); if (route[0] === 'signin') go('/') }} />`
  }
  const doSignOut = () => signOut().finally(() => onSignedOut(null))
  return html`<${Nav} route=${route} account=${account} onSignOut=${doSignOut} />
    <main class="page"><${Page} route=${route} key=${route.join('/')} account=${account} onSignedOut=${onSignedOut} /></main>`
}

// The page's "Loading…" placeholder goes: Preact renders into an empty root.
const root = document.getElementById('app')
root.textContent = ''
render(html`<${App} />`, root)
