// ui.js: the console's shared pieces: the html tag (htm over Preact),
// hooks, navigation, and the components every page uses.
import { h, render } from './vendor/preact.module.js'
import { useState, useEffect, useRef, useCallback } from './vendor/hooks.module.js'
import htm from './vendor/htm.module.js'
import { ApiError } from './api.js'

export const html = htm.bind(h)
export { render, useState, useEffect, useRef, useCallback }

// go navigates to a console route (the part after '#').
export const go = (route) => {
  location.hash = '#' + route
}

export const fmtTime = (s) => (s ? new Date(s).toLocaleString() : '')
export const errText = (e) => (e instanceof ApiError ? e.describe() : String(e?.message || e))

// useLoad runs load() on mount and when deps change; it answers
// {data, error, loading, reload}.
export function useLoad(load, deps) {
  const [st, setSt] = useState({ loading: true })
  const seq = useRef(0)
  const run = useCallback(() => {
    const n = ++seq.current
    setSt((s) => ({ ...s, loading: true }))
    load().then(
      (data) => n === seq.current && setSt({ data, loading: false }),
      (error) => n === seq.current && setSt({ error, loading: false }),
    )
  }, deps)
  useEffect(run, [run])
  return { ...st, reload: run }
}

export function ErrorBox({ error, onRetry }) {
  if (!error) return null
  return html`<div class="error" role="alert" data-test="error">
    ${errText(error)} ${onRetry && html`<button class="link" onClick=${onRetry}>Retry</button>`}
  </div>`
}

export function Empty({ children }) {
  return html`<div class="empty" data-test="empty">${children}</div>`
}

// Loaded shows a spinner, an error or the content of a useLoad state.
export function Loaded({ st, children }) {
  if (st.error) return html`<${ErrorBox} error=${st.error} onRetry=${st.reload} />`
  if (st.loading && st.data === undefined) return html`<p class="muted">Loading…</p>`
  return children(st.data)
}

// Action is a button running an async action, showing its error.
export function useAction() {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState(null)
  const run = async (fn) => {
    setBusy(true)
    setError(null)
    try {
      return await fn()
    } catch (e) {
      setError(e)
    } finally {
      setBusy(false)
    }
  }
  return { busy, error, run, setError }
}

export function Json({ value }) {
  return html`<pre class="json">${JSON.stringify(value, null, 2)}</pre>`
}

export function Progress({ value, label }) {
  return html`<div class="progress" data-test="progress"><div style=${{ width: `${Math.round(value * 100)}%` }}></div><span>${label ?? Math.round(value * 100) + '%'}</span></div>`
}

export function Status({ value }) {
  return html`<span class=${'status s-' + (value || 'none')}>${value || '—'}</span>`
}
