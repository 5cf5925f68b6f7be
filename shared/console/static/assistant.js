// assistant.js: the assistant the platform ships (docs/assistant.md,
// shared/assistant): "New assistant" (a bot created and deployed with the
// assistant's code and settings, its documents uploaded and indexed into
// its own knowledge base), an assistant's settings page, and what the
// emulator shows of an assistant's turn (the passages it retrieved). All
// through the public API, as the `assistant create` command does:
// getAssistantCode (GET /v1/admin/assistant: code, definition, defaults),
// createBot, createKnowledgeBase, upsertFile + upload, updateBot
// {code, configuration: {data}}, getBotWebchat, and listAssistantModels
// (GET /v1/admin/assistant/models: the models before a bot exists, so the
// model is chosen in the form).
import { call } from './api.js'
import { html, useState, useRef, useLoad, Loaded, ErrorBox, Empty, useAction, Progress, Status, errText } from './ui.js'
import { uploadFile } from './data.js'
import { useRole, Refused } from './role.js'

const ACTION = 'creating and changing assistants'

// The assistant's code and default settings, asked once per page load
// (~1 MB: only when an assistant is created or its code redeployed).
let codeOnce = null
const assistantCode = () => (codeOnce ??= call('GET', '/v1/admin/assistant').catch((e) => { codeOnce = null; throw e }))

// The built-in integrations an assistant installs (by name): webchat (its
// hosted page) always, hitl when it may hand over to a person.
const needs = (s) => ['webchat', ...(s.handover ? ['hitl'] : [])]
async function integrationsFor(ws, names) {
  const out = {}
  for (const name of names) {
    const { integration } = await call('GET', `/v1/admin/hub/integrations/${name}/latest`, { ws })
    out[integration.id] = { enabled: true, configuration: {} }
  }
  return out
}

// models answers the platform's models, or {none: reason} when no
// provider is configured (the reason names PLATFORM_LLM_URL: docs/llm.md).
export async function models() {
  const m = await call('GET', '/v1/admin/assistant/models')
  return m.available ? { list: m.models } : { none: m.reason }
}

// NoModel is the console's message when the platform has no model.
function NoModel({ why }) {
  return html`<div class="error" data-test="no-model"><b>No language model is configured on this platform</b>, so the assistant cannot answer yet (it tells its users so).
    Its operator sets an OpenAI-compatible endpoint (OpenAI, vLLM, Ollama): <code>PLATFORM_LLM_URL</code> (locally <code>--llm-url</code>;
    on AWS the stack parameter <code>LlmUrl</code>); the assistant then answers at once, with no change here.
    <div class="muted">The platform said: ${why}</div></div>`
}

// ModelPicker lists the models (by id, with their aliases) to choose from.
function ModelPicker({ value, onChange, disabled }) {
  const st = useLoad(models, [])
  return html`<${Loaded} st=${st}>${(m) => m.none ? html`<${NoModel} why=${m.none} />` : html`
    <label class="field">Model
      <select value=${value} onChange=${(e) => onChange(e.target.value)} disabled=${disabled} data-test="model">
        ${['best', 'fast'].map((a) => html`<option value=${a}>${a} (the platform's ${a === 'best' ? 'default' : 'fast'} model)</option>`)}
        ${m.list.map((x) => html`<option value=${x.id}>${x.id}${x.aliases?.length ? ` (${x.aliases.join(', ')})` : ''}</option>`)}
        ${value && !['best', 'fast'].includes(value) && !m.list.some((x) => x.id === value) && html`<option value=${value}>${value} (not listed now)</option>`}
      </select></label>`}</${Loaded}>`
}

// Fields are the settings besides the model (configuration.data's keys,
// docs/assistant.md); the advanced ones folded.
function Fields({ s, set, off }) {
  const num = (k) => (e) => set({ ...s, [k]: e.target.value === '' ? '' : Number(e.target.value) })
  const txt = (k) => (e) => set({ ...s, [k]: e.target.value })
  const chk = (k) => (e) => set({ ...s, [k]: e.target.checked })
  return html`<label class="field">Instructions (what the assistant is, how it answers)
      <textarea rows="5" value=${s.instructions} name="instructions" onInput=${txt('instructions')} disabled=${off} data-test="instructions"></textarea></label>
    <details class="advanced" data-test="advanced"><summary>Advanced settings</summary>
      <div class="fields">
        <label class="field">Temperature (0 to 2)<input type="number" min="0" max="2" step="0.1" value=${s.temperature} name="temperature" onInput=${num('temperature')} disabled=${off} /></label>
        <label class="field">Passages sent to the model (1 to 20)<input type="number" min="1" max="20" value=${s.passages} name="passages" onInput=${num('passages')} disabled=${off} /></label>
        <label class="field">Recent messages sent with a question (0 to 50)<input type="number" min="0" max="50" value=${s.historyMessages} name="historyMessages" onInput=${num('historyMessages')} disabled=${off} /></label>
        <label class="field">Longest answer (tokens)<input type="number" min="1" value=${s.maxTokens} name="maxTokens" onInput=${num('maxTokens')} disabled=${off} /></label>
        <label class="field">Fallback message (no answer in the documents)<input value=${s.fallbackMessage} name="fallbackMessage" onInput=${txt('fallbackMessage')} disabled=${off} /></label>
        <label class="inline"><input type="checkbox" checked=${s.citeSources} name="citeSources" onChange=${chk('citeSources')} disabled=${off} /> Cite the documents an answer comes from</label>
        <label class="inline"><input type="checkbox" checked=${s.handover} name="handover" onChange=${chk('handover')} disabled=${off} /> Hand over to a person (the inbox) when asked, or when it cannot answer</label>
      </div></details>`
}

// Documents uploads files into the assistant's knowledge base, indexed,
// each with its progress (bytes, then indexing) as the files page does.
function useDocuments() {
  const [ups, setUps] = useState([]) // [{name, status, progress, error}]
  const put = (i, v) => setUps((u) => u.map((x, j) => (j === i ? { ...x, ...v } : x)))
  const send = async (bot, files, kbId, first) => {
    let failed = null
    for (let i = 0; i < files.length; i++) {
      const f = files[i]
      try {
        await uploadFile(bot, f, f.name, { kbId }, (status, progress) => put(first + i, { status, progress }), { index: true })
      } catch (e) {
        put(first + i, { error: e })
        failed = failed || e
      }
    }
    if (failed) throw failed
  }
  const start = (bot, files, kbId) => {
    const first = ups.length
    setUps((u) => [...u, ...files.map((f) => ({ name: f.name, status: 'waiting', progress: 0 }))])
    return send(bot, files, kbId, first)
  }
  const view = ups.length > 0 && html`<ul class="uploads" data-test="documents-progress">${ups.map((u) => html`<li>
    ${u.name}: <${Status} value=${u.error ? 'failed' : u.status} />${u.status === 'indexing_completed' ? ' indexed: the assistant searches it' : ''}
    ${u.error ? html`<div class="why">${u.error.message}</div>` : html`<${Progress} value=${u.progress} label=${u.status === 'uploading' ? undefined : u.status} />`}</li>`)}</ul>`
  return { start, view }
}

const clean = (s) => {
  const out = { ...s }
  for (const k of ['temperature', 'passages', 'historyMessages', 'maxTokens']) if (out[k] === '' || Number.isNaN(out[k])) delete out[k]
  return out
}

export function NewAssistant({ ws }) {
  const code = useLoad(assistantCode, [])
  const [name, setName] = useState('')
  const [s, setS] = useState(null)
  const [steps, setSteps] = useState([])
  const [bot, setBot] = useState(null)
  const docs = useDocuments()
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may(ACTION)
  const settings = s || code.data?.defaults
  const fileInput = useRef(null)
  const say = (line) => setSteps((l) => [...l, line])
  const create = (e) => {
    e.preventDefault()
    const files = [...(fileInput.current?.files || [])]
    act.run(async () => {
      const { code: js, definition } = await assistantCode()
      const { bot: b } = await call('POST', '/v1/admin/bots', { ws, body: { name, tags: { assistant: 'v1' } } })
      say(html`Bot <code>${b.id}</code> created.`)
      let kb, data
      try {
        ;({ knowledgeBase: kb } = await call('POST', '/v1/files/knowledge-bases', { bot: b.id, body: { name: `${name} documents` } }))
        data = clean({ ...settings, kbIds: [kb.id] })
        await call('PUT', `/v1/admin/bots/${b.id}`, { ws, body: { ...definition, code: js, configuration: { data }, integrations: await integrationsFor(ws, needs(data)) } })
      } catch (e) {
        // Nothing half-made: the bot goes (as `assistant create` does).
        await call('DELETE', `/v1/admin/bots/${b.id}`, { ws }).then(() => say(html`Bot <code>${b.id}</code> deleted: it could not be deployed.`), () => {})
        throw e
      }
      say(html`The assistant's code is deployed, with its knowledge base <code>${kb.id}</code>.`)
      setBot({ id: b.id, kb: kb.id, data })
      // The bot exists: a document that fails is shown, the others go on.
      if (files.length) await docs.start(b.id, files, kb.id)
    })
  }
  return html`<h1>New assistant</h1>
    <p class="muted">A bot the platform ships that answers from your documents with your model: no code. It is deployed like any bot
      (its code is the platform's), so it runs the same locally and on AWS; everything here is in its settings, which you can change later.</p>
    <${Refused} r=${r} action=${ACTION} />
    <${Loaded} st=${code}>${() => !bot && html`<form class="stack" onSubmit=${create} data-test="new-assistant">
        <label class="field">Name<input required value=${name} onInput=${(e) => setName(e.target.value)} disabled=${off} data-test="name" /></label>
        <${ModelPicker} value=${settings.model} onChange=${(model) => setS({ ...settings, model })} disabled=${off} />
        <${Fields} s=${settings} set=${setS} off=${off} />
        <label class="field">Documents it answers from (PDF, text, Markdown, HTML, JSON, CSV…; indexed as they are uploaded)
          <input type="file" multiple ref=${fileInput} disabled=${off} data-test="documents" /></label>
        <p class="row"><button disabled=${act.busy || off}>Create assistant</button></p>
      </form>`}</${Loaded}>
    ${steps.length > 0 && html`<ul class="steps" data-test="steps">${steps.map((l) => html`<li>${l}</li>`)}</ul>`}
    ${docs.view}
    <${ErrorBox} error=${act.error} />
    ${bot && html`<${Created} ws=${ws} bot=${bot} busy=${act.busy} />`}`
}

// Created: what to do once the assistant exists: chat with it.
function Created({ ws, bot, busy }) {
  return html`<section data-test="created">
    <p>It answers with <code data-test="model-name">${bot.data.model}</code>.</p>
    ${busy ? html`<p class="muted">Uploading its documents…</p>` : html`<${ChatButtons} ws=${ws} bot=${bot.id} />`}
    <p><a href=${`#/w/${ws}/b/${bot.id}/assistant`} data-test="settings-link">All its settings</a></p>
  </section>`
}

// ChatButtons: the assistant's hosted webchat page (getBotWebchat, when
// the bot has the built-in webchat installed) and the console's emulator.
function ChatButtons({ ws, bot, webchat = true }) {
  const page = useLoad(() => (webchat ? call('GET', `/v1/admin/bots/${bot}/webchat`, { ws, query: { type: 'sharableUrl' } }).then((r) => r.code) : Promise.resolve(null)), [ws, bot, webchat])
  return html`<p class="row" data-test="chat-buttons">
    ${page.data && html`<a class="button" href=${page.data} target="_blank" rel="noopener" data-test="webchat-link">Chat on its webchat page</a>`}
    <a class="button" href=${`#/w/${ws}/b/${bot}/emulator`} data-test="emulator-link">Chat in the emulator</a>
    ${!webchat && html`<span class="muted" data-test="no-webchat">No webchat page: the built-in <code>webchat</code> integration is not installed on this bot.</span>`}
    ${page.error && html`<span class="why">${errText(page.error)}</span>`}
  </p>`
}

// isAssistant: a bot the console made (tagged `assistant`) or the
// `assistant create` command made (no tag: its configuration has the
// assistant's settings).
const isAssistant = (b) => !!b.tags?.assistant || (typeof b.configuration?.data?.instructions === 'string' && Array.isArray(b.configuration?.data?.kbIds))

// AssistantSettings is an assistant's settings page: every key of its
// configuration (updateBot {configuration: {data}}: the next message uses
// them), its documents, and the ways to chat with it.
export function AssistantSettings({ ws, bot }) {
  const st = useLoad(() => call('GET', `/v1/admin/bots/${bot}`, { ws }).then((r) => r.bot), [ws, bot])
  return html`<${Loaded} st=${st}>${(b) => html`<h1>${b.name || 'Assistant'} <small>assistant · <code>${b.id}</code></small></h1>
    ${isAssistant(b) ? html`<${SettingsForm} ws=${ws} b=${b} />`
      : html`<${Empty}>This bot is not an assistant (it was not created with “New assistant” or <code>assistant create</code>).</${Empty}>`}`}</${Loaded}>`
}

function SettingsForm({ ws, b }) {
  const defaults = useLoad(assistantCode, [])
  const [s, setS] = useState({ ...(b.configuration?.data || {}) })
  const [saved, setSaved] = useState('')
  const [hitl, setHitl] = useState(() => Object.values(b.integrations || {}).some((i) => i.name === 'hitl'))
  const docs = useDocuments()
  const act = useAction()
  const r = useRole(ws)
  const off = !r.may(ACTION)
  const merged = { ...(defaults.data?.defaults || {}), ...s }
  // Its documents: the indexed files of its knowledge bases (of the bot,
  // when it names none: it then searches them all).
  const kbs = merged.kbIds || []
  const files = useLoad(() => call('GET', '/v1/files', { bot: b.id, query: { indexed: true } })
    .then((x) => x.files.filter((f) => !kbs.length || kbs.includes(f.tags?.kbId))), [b.id, kbs.join()])
  const save = (e) => {
    e.preventDefault()
    act.run(async () => {
      const data = clean(merged)
      const body = { configuration: { data } }
      // Handing over needs the hitl integration: installed when missing
      // (only it: giving webchat again would replace its installation).
      if (data.handover && !hitl) body.integrations = await integrationsFor(ws, ['hitl'])
      await call('PUT', `/v1/admin/bots/${b.id}`, { ws, body })
      if (body.integrations) setHitl(true)
      setSaved('Saved: the next message uses these settings.')
    })
  }
  const input = useRef(null)
  const add = (e) => {
    e.preventDefault()
    const fs = [...(input.current?.files || [])]
    if (!fs.length) return
    act.run(async () => {
      let kb = (merged.kbIds || [])[0]
      if (!kb) {
        // An assistant without a knowledge base yet (made elsewhere): one now.
        kb = (await call('POST', '/v1/files/knowledge-bases', { bot: b.id, body: { name: `${b.name || b.id} documents` } })).knowledgeBase.id
        const data = clean({ ...merged, kbIds: [kb] })
        await call('PUT', `/v1/admin/bots/${b.id}`, { ws, body: { configuration: { data } } })
        setS(data)
      }
      try {
        await docs.start(b.id, fs, kb)
      } finally {
        input.current.value = ''
        files.reload()
      }
    })
  }
  return html`<${Refused} r=${r} action=${ACTION} />
    <${ChatButtons} ws=${ws} bot=${b.id} webchat=${Object.values(b.integrations || {}).some((i) => i.name === 'webchat' && i.enabled)} />
    <form class="stack" onSubmit=${save} data-test="assistant-settings">
      ${r.known && (off
        ? html`<p>Model: <code data-test="model-name">${merged.model}</code></p>`
        : html`<${ModelPicker} value=${merged.model} onChange=${(model) => setS({ ...s, model })} />`)}
      <${Fields} s=${merged} set=${setS} off=${off} />
      <p class="row"><button disabled=${act.busy || off}>Save settings</button></p>
    </form>
    ${saved && html`<div class="notice" data-test="settings-saved">${saved}</div>`}
    <h2>Documents</h2>
    <form class="row" onSubmit=${add} data-test="add-documents">
      <input type="file" multiple required ref=${input} disabled=${off} />
      <button class="secondary" disabled=${act.busy || off}>Add documents</button>
    </form>
    ${docs.view}
    <${ErrorBox} error=${act.error} />
    <${Loaded} st=${files}>${(fs) => fs.length === 0 ? html`<${Empty}>No document yet: add one above. Without documents the assistant answers from its instructions alone.</${Empty}>`
      : html`<table class="list" data-test="documents"><thead><tr><th>Document</th><th>Status</th><th>Knowledge base</th></tr></thead><tbody>
        ${fs.map((f) => html`<tr><td>${f.key}</td><td><${Status} value=${f.status} /> ${f.failedStatusReason || ''}</td><td><code>${f.tags?.kbId || '—'}</code></td></tr>`)}
      </tbody></table>`}</${Loaded}>
    <p class="muted">Files of this bot in <a href=${`#/w/${ws}/b/${b.id}/files`}>Files</a> that are indexed and tagged with one of its knowledge bases are its documents.</p>`
}

// AssistantLink is the bot's sub-nav link to its settings, for an assistant.
const known = new Map()
export function AssistantLink({ ws, bot }) {
  const st = useLoad(() => {
    if (!known.has(bot)) known.set(bot, call('GET', `/v1/admin/bots/${bot}`, { ws }).then((r) => isAssistant(r.bot), () => false))
    return known.get(bot)
  }, [ws, bot])
  if (!st.data) return null
  const href = `#/w/${ws}/b/${bot}/assistant`
  return html`<a href=${href} class=${location.hash === href ? 'active' : ''} data-test="assistant-link">Assistant</a>`
}

// turns reads an assistant's turns of a conversation from the bot's log:
// one `assistant.turn {json}` line per user message it handled
// (docs/assistant.md), keyed by the user's message id and the reply's.
export async function turns(ws, bot, conv) {
  const out = new Map()
  let nextToken
  do {
    const r = await call('GET', `/v1/admin/bots/${bot}/logs`, { ws, query: { timeStart: conv.since, messageContains: `assistant.turn {"conversationId":"${conv.id}"`, pageSize: 100, nextToken } })
    for (const l of r.logs) {
      const i = l.message.indexOf(' ')
      try {
        const t = JSON.parse(l.message.slice(i + 1))
        if (t.conversationId !== conv.id) continue
        if (t.messageId) out.set(t.messageId, t)
        if (t.replyId) out.set(t.replyId, t)
      } catch {}
    }
    nextToken = r.nextToken
  } while (nextToken && out.size < 1000)
  return out
}

// Turn shows under an assistant's answer what it retrieved: each passage
// (document, score, text) and the turn's status when it is not an answer.
export function Turn({ t }) {
  if (!t) return null
  const n = (t.passages || []).length
  return html`<div class="turn" data-test="assistant-turn">
    ${t.status !== 'answered' && html`<div class=${t.status === 'fallback' || t.status === 'handover' ? 'muted' : 'why'}>${t.status}${t.error ? ': ' + t.error : ''}</div>`}
    <details open=${n > 0}><summary>${n === 0 ? 'no passage retrieved' : `${n} passage${n > 1 ? 's' : ''} retrieved`}${t.query ? html` for <q>${t.query}</q>` : ''}</summary>
      <ol class="passages">${(t.passages || []).map((p) => html`<li data-test="passage"><b>${p.fileKey}</b> <span class="muted">score ${typeof p.score === 'number' ? p.score.toFixed(2) : p.score}</span>
        ${p.content && html`<div class="passage" title=${p.content}>${p.content.length > 400 ? p.content.slice(0, 400) + '…' : p.content}</div>`}</li>`)}</ol>
    </details></div>`
}
