// Generates the hub's standard interfaces (shared/hubstd/interfaces.json)
// from the interface definitions of botpress/botpress (interfaces/*), the
// way `bp deploy` of an interface sends them to createInterface (the CLI's
// prepareCreateInterfaceBody: each schema through zui's legacy JSON-schema
// transform, dereferenced), so the platform publishes them with their real
// schemas and versions.
//
//   node generate.mjs <botpress checkout> > ../../shared/hubstd/interfaces.json
//
// The checkout needs interfaces/ and packages/common/src. The definitions
// import @botpress/sdk and @botpress/common: both are shimmed here with
// what the definitions use (the SDK's InterfaceDefinition constructor, its
// WELL_KNOWN_ATTRIBUTES, zui's z; common's llm, speechToText and
// textToImage schemas), since the SDK 7.2.4 wants a zui (^2.4.1) this
// registry does not serve; zui 2.1.1 has the same transforms.
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import * as esbuild from 'esbuild'
import { dereference } from '@apidevtools/json-schema-ref-parser'
import { z } from '@bpinternal/zui'

const HERE = path.dirname(fileURLToPath(import.meta.url))
const repo = path.resolve(process.argv[2] || '')
if (!fs.existsSync(path.join(repo, 'interfaces'))) {
  console.error('usage: node generate.mjs <botpress/botpress checkout>')
  process.exit(2)
}
const work = fs.mkdtempSync(path.join(HERE, '.work-'))
process.on('exit', () => fs.rmSync(work, { recursive: true, force: true }))

const common = path.join(work, 'common-shim.mjs')
fs.writeFileSync(common, `
import * as llmSchemas from ${JSON.stringify(path.join(repo, 'packages/common/src/llm/schemas.ts'))}
import * as stt from ${JSON.stringify(path.join(repo, 'packages/common/src/speech-to-text/schemas.ts'))}
import * as tti from ${JSON.stringify(path.join(repo, 'packages/common/src/text-to-image/schemas.ts'))}
export const llm = { schemas: llmSchemas }
export const speechToText = { schemas: stt }
export const textToImage = { schemas: tti }
`)

const shims = {
  name: 'shims',
  setup(build) {
    build.onResolve({ filter: /^@botpress\/sdk$/ }, () => ({ path: path.join(HERE, 'sdk-shim.mjs') }))
    build.onResolve({ filter: /^@botpress\/common$/ }, () => ({ path: common }))
  },
}

const legacy = async (schema) =>
  dereference(z.transforms.toJSONSchemaLegacy(schema, { target: 'jsonSchema7' }), { resolve: { external: false, file: false, http: false } })

const mapValues = async (obj, f) => Object.fromEntries(await Promise.all(Object.entries(obj ?? {}).map(async ([k, v]) => [k, await f(v, k)])))

const out = []
for (const dir of fs.readdirSync(path.join(repo, 'interfaces')).sort()) {
  const entry = path.join(repo, 'interfaces', dir, 'interface.definition.ts')
  if (!fs.existsSync(entry)) continue
  const bundle = path.join(work, `${dir}.mjs`)
  await esbuild.build({
    entryPoints: [entry], bundle: true, format: 'esm', platform: 'node', outfile: bundle, logLevel: 'error',
    plugins: [shims], nodePaths: [path.join(HERE, 'node_modules')], external: ['@bpinternal/zui'],
  })
  const def = (await import(pathToFileURL(bundle).href)).default
  out.push({
    name: def.name,
    version: def.version,
    title: def.title,
    description: def.description,
    entities: await mapValues(def.entities, async (e) => ({ ...e, schema: await legacy(e.schema) })),
    events: await mapValues(def.events, async (e) => ({ ...e, schema: await legacy(e.schema) })),
    actions: await mapValues(def.actions, async (a) => ({
      ...a,
      input: { ...a.input, schema: await legacy(a.input.schema) },
      output: { ...a.output, schema: await legacy(a.output.schema) },
    })),
    channels: await mapValues(def.channels, async (c) => ({
      ...c,
      messages: await mapValues(c.messages, async (m) => ({ ...m, schema: await legacy(m.schema) })),
    })),
    attributes: def.attributes,
  })
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n')
