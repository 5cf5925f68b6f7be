// health.js: the health page (#/health) and a bot's metrics
// (#/w/<ws>/b/<bot>/metrics), charts of the platform's metrics over the
// last hour or day (docs/metrics.md) drawn by the vendored uPlot. The
// series come from GET /v1/admin/metrics (and /v1/admin/bots/{id}/metrics):
// kept in memory by the local platform; on AWS the answer says they are
// not kept here and names the CloudWatch dashboard, which the page links.
import { call } from './api.js'
import { html, useState, useEffect, useRef, ErrorBox } from './ui.js'
import uPlot from './vendor/uplot/uPlot.esm.js'

// The stylesheets: uPlot's and the page's own (the CSP allows this
// origin's stylesheets, not inline styles).
for (const href of ['/console/vendor/uplot/uPlot.min.css', '/console/health.css']) {
  if (!document.querySelector(`link[href="${href}"]`)) {
    const l = document.createElement('link')
    l.rel = 'stylesheet'
    l.href = href
    document.head.appendChild(l)
  }
}

const COLORS = ['#2b59c3', '#b42318', '#067647', '#b54708', '#6941c6', '#0e9384', '#c11574']

const TITLES = {
  requests: 'Requests and errors (per step)',
  latency: 'Latency (seconds)',
  deliveries: 'Deliveries (per step)',
  outboxAge: 'Outbox age (seconds)',
  streams: 'Open streams',
  llmTokens: 'LLM tokens by model (per step)',
  messages: 'Messages and events (per step)',
}

// Chart draws one chart: times and one line per name.
function Chart({ name, times, chart }) {
  const el = useRef(null)
  const names = Object.keys(chart.lines).sort()
  const total = names.reduce((s, n) => s + chart.lines[n].reduce((a, b) => a + b, 0), 0)
  useEffect(() => {
    if (!el.current) return
    const width = Math.max(280, Math.min(el.current.clientWidth || 560, 900))
    const opts = {
      width, height: 200,
      series: [{}, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
      axes: [{}, { size: 50 }],
      scales: { x: { time: true } },
      legend: { show: true },
    }
    const data = [times, ...names.map((n) => chart.lines[n])]
    const plot = new uPlot(opts, data, el.current)
    return () => plot.destroy()
  }, [times, chart])
  const sums = names.map((n) => `${n}=${Math.round(chart.lines[n].reduce((a, b) => a + b, 0) * 1000) / 1000}`).join(';')
  return html`<section class="chart" data-test=${'chart-' + name} data-total=${String(Math.round(total * 1000) / 1000)} data-lines=${names.join(',')} data-sums=${sums}>
    <h2>${TITLES[name] || name}</h2>
    ${names.length === 0 ? html`<p class="empty">No data yet.</p>` : html`<div ref=${el}></div>`}
  </section>`
}

// useSeries loads path's series for win, again every step.
function useSeries(path, win, opts) {
  const [st, setSt] = useState({ loading: true })
  useEffect(() => {
    let stop = false
    let timer
    const load = () => call('GET', path, { ...opts, query: { window: win } }).then(
      (data) => { if (!stop) { setSt({ data }); timer = setTimeout(load, Math.max(2, Math.min(data.stepSeconds || 10, 60)) * 1000) } },
      (error) => { if (!stop) setSt({ error }) },
    )
    load()
    return () => { stop = true; clearTimeout(timer) }
  }, [path, win])
  return st
}

function Window({ win, setWin }) {
  return html`<div class="windows" role="group" aria-label="Window">
    ${['hour', 'day'].map((w) => html`<button class=${w === win ? 'active' : 'link'} data-test=${'win-' + w} onClick=${() => setWin(w)}>Last ${w}</button>`)}
  </div>`
}

function Charts({ st, order }) {
  if (st.error) return html`<${ErrorBox} error=${st.error} />`
  if (st.loading) return html`<p class="muted">Loading…</p>`
  const d = st.data
  if (!d.available) {
    return html`<p class="notice" data-test="no-series">The series are not kept by this deployment (on AWS the metrics are CloudWatch's, namespace BotPlatform).
      ${d.dashboardUrl ? html` <a href=${d.dashboardUrl} target="_blank" rel="noopener" data-test="dashboard">Open the CloudWatch dashboard</a>` : ''}</p>`
  }
  return html`<p class="muted">A point every ${d.stepSeconds} s; ${d.times.length} points.</p>
    <div class="charts">${order.filter((n) => d.charts[n]).map((n) => html`<${Chart} key=${n} name=${n} times=${d.times} chart=${d.charts[n]} />`)}</div>`
}

// Health is the platform's page.
export function Health() {
  const [win, setWin] = useState('hour')
  const st = useSeries('/v1/admin/metrics', win, {})
  return html`<h1>Health <small>the platform's metrics (also at /metrics for Prometheus)</small></h1>
    <${Window} win=${win} setWin=${setWin} />
    <${Charts} st=${st} order=${['requests', 'latency', 'deliveries', 'outboxAge', 'streams', 'llmTokens']} />`
}

// BotMetrics is a bot's section: its messages, events and LLM tokens.
export function BotMetrics({ ws, bot }) {
  const [win, setWin] = useState('hour')
  const st = useSeries(`/v1/admin/bots/${encodeURIComponent(bot)}/metrics`, win, { ws })
  return html`<h1>Metrics <small>${bot}</small></h1>
    <${Window} win=${win} setWin=${setWin} />
    <${Charts} st=${st} order=${['messages', 'llmTokens']} />`
}
