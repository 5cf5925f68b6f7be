// api.js: the console's client of the platform's public API, the same
// requests @botpress/client makes (Authorization: Bearer <token>,
// x-workspace-id, x-bot-id, x-integration-alias), with fetch. Errors come
// back as ApiError, carrying the API's error shape ({id, code, type,
// message}) or saying that the platform could not be reached.

const TOKEN_KEY = 'botforge.console.token'
const CSRF_KEY = 'botforge.console.csrf'

// The console signs in two ways (auth.js): a browser session (password,
// single sign-on, setup or invitation link) whose value is an HttpOnly
// cookie the page never sees, with a CSRF token sent in a header on each
// call; or a pasted personal access token, sent as a bearer token. Both
// live in sessionStorage: gone when the tab closes, never in a URL. The
// CSRF token is derived from the session, so any tab reads it again from
// GET /auth/session. docs/console.md and docs/signin.md say why.
export const session = {
  get token() {
    return sessionStorage.getItem(TOKEN_KEY) || ''
  },
  set token(v) {
    if (v) sessionStorage.setItem(TOKEN_KEY, v)
    else sessionStorage.removeItem(TOKEN_KEY)
  },
  get csrf() {
    return sessionStorage.getItem(CSRF_KEY) || ''
  },
  set csrf(v) {
    if (v) sessionStorage.setItem(CSRF_KEY, v)
    else sessionStorage.removeItem(CSRF_KEY)
  },
}

export class ApiError extends Error {
  constructor({ status = 0, type = 'NetworkError', message, id = '' }) {
    super(message)
    this.status = status
    this.type = type
    this.id = id
  }
  // describe is what the console shows: the API's message, and what the
  // status means for the person using it.
  describe() {
    if (this.status === 0) return this.message
    const hint = {
      401: 'You are not signed in (the session ended, or the token was refused): sign in again.',
      403: 'Your role in this workspace does not allow this (ask an administrator or owner).',
      404: 'It does not exist, or you cannot see it.',
      429: 'Too many requests: wait a moment and try again.',
    }[this.status]
    return `${this.type} (${this.status}): ${this.message}${hint ? ' — ' + hint : ''}`
  }
}

// call sends one API request. opts: {query, body, ws, bot, alias, token}.
export async function call(method, path, opts = {}) {
  const headers = {}
  const token = opts.token ?? session.token
  if (token) headers.Authorization = `Bearer ${token}`
  else if (session.csrf) headers['X-CSRF-Token'] = session.csrf // the session cookie goes with it (same origin)
  if (opts.ws) headers['x-workspace-id'] = opts.ws
  if (opts.bot) headers['x-bot-id'] = opts.bot
  if (opts.alias) headers['x-integration-alias'] = opts.alias
  let url = path
  if (opts.query) {
    const q = new URLSearchParams()
    for (const [k, v] of Object.entries(opts.query)) {
      if (v === undefined || v === null || v === '') continue
      if (Array.isArray(v)) v.forEach((x) => q.append(k, x))
      else q.append(k, String(v))
    }
    const s = q.toString()
    if (s) url += '?' + s
  }
  let body
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json'
    body = JSON.stringify(opts.body)
  }
  let res
  try {
    res = await fetch(url, { method, headers, body, cache: 'no-store', credentials: 'same-origin' })
  } catch (e) {
    throw new ApiError({ message: `The platform did not answer (${e.message}): is it running at ${location.origin}?` })
  }
  const text = await res.text()
  let data = null
  try {
    data = text ? JSON.parse(text) : {}
  } catch {
    data = null
  }
  if (!res.ok) {
    if (data && typeof data.message === 'string') {
      throw new ApiError({ status: res.status, type: data.type || 'Error', message: data.message, id: data.id })
    }
    const msg = res.status >= 502 && res.status <= 504
      ? `the platform is unreachable behind its gateway (HTTP ${res.status})`
      : `HTTP ${res.status}: ${text.slice(0, 200)}`
    throw new ApiError({ status: res.status, type: 'HttpError', message: msg })
  }
  if (data === null) throw new ApiError({ status: res.status, type: 'BadResponse', message: 'the platform answered something that is not JSON' })
  return data
}

// all follows nextToken over every page of a list (up to max items).
export async function all(method, path, key, opts = {}, max = 1000) {
  const out = []
  let nextToken
  do {
    const r = await call(method, path, { ...opts, query: { ...(opts.query || {}), nextToken } })
    out.push(...(r[key] || []))
    nextToken = r.meta?.nextToken || r.nextToken
  } while (nextToken && out.length < max)
  return out
}

// upload PUTs a file's content to its uploadUrl with progress
// (fetch has no upload progress; XMLHttpRequest does).
export function upload(url, file, contentType, onProgress) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest()
    x.open('PUT', url)
    if (contentType) x.setRequestHeader('Content-Type', contentType)
    x.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total)
    x.onload = () => (x.status >= 200 && x.status < 300 ? resolve() : reject(new ApiError({ status: x.status, type: 'UploadFailed', message: `the storage answered HTTP ${x.status}: ${x.responseText.slice(0, 200)}` })))
    x.onerror = () => reject(new ApiError({ message: 'the upload could not reach the storage' }))
    x.send(file)
  })
}
