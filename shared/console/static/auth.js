// auth.js: signing in and out (docs/signin.md): the sign-in page (email
// and password, "Sign in with <provider>" links, a personal access token
// last), the setup and invitation pages, the account page (password,
// two-factor, sessions, tokens) and a workspace's pending invitations.
// Everything is a plain link or a fetch under the console's CSP: the
// single sign-on starts with a link to /auth/oidc/start, which the
// platform answers with the provider's redirect.
import { call, session, ApiError } from './api.js'
import { html, useState, useLoad, Loaded, ErrorBox, useAction, fmtTime, go } from './ui.js'
import { useRole, Refused } from './role.js'

const ROLES = ['viewer', 'billing', 'developer', 'manager', 'administrator', 'owner']

// restore finds who is signed in on load: the pasted token's account, or
// the browser session's (whose CSRF token is read again).
export async function restore() {
  if (!session.token) {
    const s = await call('GET', '/auth/session')
    // Not signed in: the sign-in page (as a refused token would).
    if (!s.signedIn) throw Object.assign(new Error('not signed in'), { status: 401 })
    session.csrf = s.csrfToken
  }
  return (await call('GET', '/v1/admin/account/me')).account
}

// signOut ends the browser session (a token is just forgotten).
export async function signOut() {
  const hadSession = !session.token && session.csrf
  try {
    if (hadSession) await call('POST', '/auth/signout')
  } finally {
    session.token = ''
    session.csrf = ''
  }
}

// afterSession finishes a sign-in that opened a session (password, link).
async function afterSession(r, onSignedIn) {
  session.token = ''
  session.csrf = r.csrfToken
  const { account } = await call('GET', '/v1/admin/account/me')
  onSignedIn(account)
}

function Providers({ providers, verb = 'Sign in with' }) {
  if (!providers?.length) return null
  return html`<div class="providers" data-test="providers">
    ${providers.map((p) => html`<a class="button" data-test="sso" href=${p.url}>${verb} ${p.name}</a>`)}
  </div>`
}

export function SignIn({ onSignedIn, reason }) {
  const cfg = useLoad(() => call('GET', '/auth/config'), [])
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [code, setCode] = useState('')
  const [needCode, setNeedCode] = useState(false)
  const [token, setToken] = useState('')
  const [error, setError] = useState(reason || null)
  const [busy, setBusy] = useState(false)
  const run = async (fn) => {
    setBusy(true)
    setError(null)
    try {
      await fn()
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  const withPassword = (e) => {
    e.preventDefault()
    run(async () => {
      const r = await call('POST', '/auth/password', { token: '', body: { email, password, code: needCode ? code : undefined } })
      if (r.totpRequired) {
        setNeedCode(true)
        return
      }
      await afterSession(r, onSignedIn)
    })
  }
  const withToken = (e) => {
    e.preventDefault()
    run(async () => {
      const r = await call('GET', '/v1/admin/account/me', { token: token.trim() })
      session.token = token.trim()
      session.csrf = ''
      onSignedIn(r.account)
    })
  }
  const c = cfg.data || { password: true, providers: [] }
  return html`<main class="signin">
    <h1>Bot platform console</h1>
    ${c.password && html`<form onSubmit=${withPassword} data-test="signin-password">
      <label for="email">Email</label>
      <input id="email" name="email" type="email" autocomplete="username" required value=${email} onInput=${(e) => setEmail(e.target.value)} />
      <label for="password">Password</label>
      <input id="password" name="password" type="password" autocomplete="current-password" required value=${password} onInput=${(e) => setPassword(e.target.value)} />
      ${needCode && html`<label for="code">Two-factor code (or a recovery code)</label>
        <input id="code" name="code" autocomplete="one-time-code" inputmode="numeric" required value=${code} onInput=${(e) => setCode(e.target.value)} />`}
      <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
    </form>`}
    <${Providers} providers=${c.providers} />
    <${ErrorBox} error=${error} />
    <section class="token-signin">
      <h2>Or with a personal access token</h2>
      <form onSubmit=${withToken} data-test="signin">
        <label for="token">Personal access token</label>
        <input id="token" name="token" type="password" autocomplete="off" required value=${token} onInput=${(e) => setToken(e.target.value)} />
        <button type="submit" disabled=${busy}>${busy ? 'Signing in…' : 'Sign in'}</button>
        <p class="muted">Locally, the first account's token is in <code>.data/admin-token</code>. It is kept in this tab only (sessionStorage) and forgotten when the tab closes.</p>
      </form>
    </section>
  </main>`
}

// LinkPage accepts a setup (kind "setup") or invitation link: set a
// password, or link single sign-on.
export function LinkPage({ token, kind, onSignedIn }) {
  const st = useLoad(() => call('GET', `/auth/links/${encodeURIComponent(token)}`, { token: '' }), [token])
  const [password, setPassword] = useState('')
  const act = useAction()
  const accept = (e) => {
    e.preventDefault()
    act.run(async () => {
      const r = await call('POST', `/auth/links/${encodeURIComponent(token)}`, { token: '', body: { password } })
      await afterSession(r, onSignedIn)
      go(r.workspaceId ? `/w/${r.workspaceId}` : '/')
    })
  }
  return html`<main class="signin" data-test=${kind}>
    <h1>${kind === 'setup' ? 'Set up your account' : 'Accept your invitation'}</h1>
    <${Loaded} st=${st}>${(l) => html`
      <p>${l.kind === 'invitation' ? html`You are invited to <b>${l.workspaceName || 'a workspace'}</b> as <b>${l.role}</b>. ` : ''}Your account: <b data-test="link-email">${l.email}</b>. This link works once, until ${fmtTime(l.expiresAt)}.</p>
      ${l.password && html`<form onSubmit=${accept} data-test="accept-link">
        <label for="new-password">Choose a password (at least 8 characters; a long passphrase is best)</label>
        <input id="new-password" type="password" autocomplete="new-password" minlength="8" required value=${password} onInput=${(e) => setPassword(e.target.value)} />
        <button type="submit" disabled=${act.busy}>Set password and sign in</button>
      </form>`}
      <${Providers} providers=${l.providers} />
    `}</${Loaded}>
    <${ErrorBox} error=${act.error} />
    <p><a href="#/">Back to sign-in</a></p>
  </main>`
}

export function Account({ account, onSignedOut }) {
  const st = useLoad(() => Promise.all([call('GET', '/v1/admin/account/signin'), call('GET', '/v1/admin/account/sessions')]), [])
  const act = useAction()
  const [cur, setCur] = useState('')
  const [next, setNext] = useState('')
  const [enrol, setEnrol] = useState(null)
  const [code, setCode] = useState('')
  const [codes, setCodes] = useState(null)
  const [offPassword, setOffPassword] = useState('')
  const changePassword = (e) => {
    e.preventDefault()
    act.run(async () => {
      await call('PUT', '/v1/admin/account/password', { body: { currentPassword: cur, newPassword: next } })
      // Every session ended: the browser's too.
      if (!session.token) {
        session.csrf = ''
        onSignedOut(new ApiError({ status: 401, type: 'PasswordChanged', message: 'Your password was changed and every session ended: sign in with the new password.' }))
      } else st.reload()
    })
  }
  const startTotp = () => act.run(async () => setEnrol(await call('POST', '/v1/admin/account/totp')))
  const enableTotp = (e) => {
    e.preventDefault()
    act.run(async () => {
      const r = await call('POST', '/v1/admin/account/totp/enable', { body: { code } })
      setCodes(r.recoveryCodes)
      setEnrol(null)
      setCode('')
      st.reload()
    })
  }
  const disableTotp = (e) => {
    e.preventDefault()
    act.run(async () => { await call('POST', '/v1/admin/account/totp/disable', { body: { password: offPassword } }); setOffPassword(''); st.reload() })
  }
  const revoke = (s) => act.run(async () => {
    await call('DELETE', `/v1/admin/account/sessions/${s.id}`)
    if (s.current) onSignedOut(null)
    else st.reload()
  })
  const endAll = () => confirm('Sign out everywhere, this browser included?') && act.run(async () => {
    await call('POST', '/v1/admin/account/sessions/end')
    if (!session.token) onSignedOut(null)
    else st.reload()
  })
  return html`<h1>Account <small>${account?.email}</small></h1>
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${([s, { sessions }]) => html`
      <h2>Password</h2>
      <form class="row" onSubmit=${changePassword} data-test="change-password">
        ${s.hasPassword && html`<input type="password" placeholder="Current password" autocomplete="current-password" required value=${cur} onInput=${(e) => setCur(e.target.value)} />`}
        <input type="password" placeholder="New password (8 characters or more)" autocomplete="new-password" minlength="8" required value=${next} onInput=${(e) => setNext(e.target.value)} />
        <button disabled=${act.busy}>${s.hasPassword ? 'Change password' : 'Set password'}</button>
      </form>
      <p class="muted">Changing the password ends every session of this account, this one included.</p>

      <h2>Two-factor authentication</h2>
      ${s.totpEnabled
        ? html`<p data-test="totp-on">On (${s.recoveryCodesLeft} recovery codes left).</p>
          <form class="row" onSubmit=${disableTotp} data-test="totp-disable">
            <input type="password" placeholder="Password" required=${s.hasPassword} value=${offPassword} onInput=${(e) => setOffPassword(e.target.value)} />
            <button class="secondary" disabled=${act.busy}>Turn off</button>
          </form>`
        : enrol
          ? html`<div class="notice" data-test="totp-enrol">Add this key to your authenticator app (or open the otpauth link on your phone):
              <p><code data-test="totp-secret">${enrol.secret}</code></p><p><a href=${enrol.otpauthUrl}>otpauth link</a></p></div>
            <form class="row" onSubmit=${enableTotp} data-test="totp-enable">
              <input id="totp-code" placeholder="6-digit code" inputmode="numeric" autocomplete="one-time-code" required value=${code} onInput=${(e) => setCode(e.target.value)} />
              <button disabled=${act.busy}>Turn on</button>
            </form>`
          : html`<p>Off. <button class="secondary" data-test="totp-start" onClick=${startTotp} disabled=${act.busy}>Set up an authenticator</button></p>`}
      ${codes && html`<div class="notice" data-test="recovery-codes">Recovery codes (each works once; shown once, keep them safe):
        <pre>${codes.join('\n')}</pre><button class="link" onClick=${() => setCodes(null)}>Done</button></div>`}

      <h2>Single sign-on</h2>
      ${s.identities.length
        ? html`<ul>${s.identities.map((i) => html`<li>${i.email || i.sub} at <code>${i.iss}</code> (linked ${fmtTime(i.linkedAt)})</li>`)}</ul>`
        : html`<p class="muted">No identity linked${s.providers.length ? ': an invitation or setup link links one ("Sign in with …").' : ' (no provider is configured).'}</p>`}

      <h2>Sessions</h2>
      <table class="list" data-test="sessions"><thead><tr><th>Signed in</th><th>How</th><th>Last used</th><th>From</th><th></th></tr></thead><tbody>
        ${sessions.map((x) => html`<tr><td>${fmtTime(x.createdAt)}${x.current ? html` <b>(this browser)</b>` : ''}</td><td>${x.method}</td>
          <td>${fmtTime(x.lastSeenAt)}</td><td>${x.address} <span class="muted">${x.userAgent}</span></td>
          <td><button class="link danger" onClick=${() => revoke(x)}>Revoke</button></td></tr>`)}
      </tbody></table>
      ${!sessions.length && html`<p class="muted">No browser session (signed in with a personal access token).</p>`}
      <p><button class="secondary" onClick=${endAll} data-test="end-all">Sign out everywhere</button></p>

      <h2>Personal access tokens</h2>
      <p>For the API, the CLI and scripts: <a href="#/tokens">manage your tokens</a>.</p>
    `}</${Loaded}>`
}

// Invitations: a workspace's pending invitations, and inviting someone
// with a link to copy (no mail is sent).
export function Invitations({ ws }) {
  const r = useRole(ws)
  if (!r.known) return html`<h2>Invitations</h2>` // only an administrator may even list them: ask first
  if (!r.may('inviting people')) return html`<h2>Invitations</h2><${Refused} r=${r} action="inviting people" />`
  return html`<${InvitationList} ws=${ws} />`
}

function InvitationList({ ws }) {
  const st = useLoad(() => call('GET', '/v1/admin/workspace-invitations', { ws }).then((r) => r.invitations), [ws])
  const [email, setEmail] = useState('')
  const [role, setRole] = useState('developer')
  const [link, setLink] = useState(null)
  const act = useAction()
  const invite = (e) => {
    e.preventDefault()
    act.run(async () => {
      const r = await call('POST', '/v1/admin/workspace-invitations', { ws, body: { email, role } })
      setLink(r.invitation ? { email, ...r.invitation } : { email, none: true })
      setEmail('')
      st.reload()
      // The invited member is listed above as soon as invited.
      window.dispatchEvent(new Event('members-changed'))
    })
  }
  const renew = (i) => act.run(async () => { const r = await call('POST', `/v1/admin/workspace-invitations/${i.id}/renew`, { ws }); setLink({ email: i.email, ...r.invitation }); st.reload() })
  const revoke = (i) => act.run(async () => { await call('DELETE', `/v1/admin/workspace-invitations/${i.id}`, { ws }); st.reload() })
  return html`<h2>Invitations</h2>
    <form class="row" onSubmit=${invite} data-test="invite-link">
      <input type="email" placeholder="email@example.com" required value=${email} onInput=${(e) => setEmail(e.target.value)} />
      <select value=${role} onChange=${(e) => setRole(e.target.value)}>${ROLES.map((r) => html`<option>${r}</option>`)}</select>
      <button disabled=${act.busy}>Invite with a link</button>
    </form>
    ${link && (link.none
      ? html`<div class="notice">${link.email} can already sign in: added to the workspace.</div>`
      : html`<div class="notice" data-test="invitation-link">Send this link to ${link.email} (it works once, until ${fmtTime(link.expiresAt)}):
          <p><code>${link.url}</code></p><button class="link" onClick=${() => navigator.clipboard?.writeText(link.url)}>Copy</button></div>`)}
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${st}>${(list) => list.length
      ? html`<table class="list" data-test="invitations"><thead><tr><th>Email</th><th>Role</th><th>Invited by</th><th>Expires</th><th></th></tr></thead><tbody>
          ${list.map((i) => html`<tr><td>${i.email}</td><td>${i.role}</td><td>${i.invitedBy}</td><td>${fmtTime(i.expiresAt)}</td>
            <td><button class="link" onClick=${() => renew(i)}>New link</button> <button class="link danger" onClick=${() => revoke(i)}>Revoke</button></td></tr>`)}
        </tbody></table>`
      : html`<p class="muted">No invitation pending.</p>`}</${Loaded}>`
}
