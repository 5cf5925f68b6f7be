// Response validation against the reference API document
// (shared/openapi/reference.json, OpenAPI 3.0).
//
// The document is loaded once. OpenAPI 3.0's `nullable: true` is rewritten
// to JSON Schema (a "null" type, a null enum member, or an anyOf with null),
// because Ajv only understands `nullable` next to `type`; vendor extensions
// (x-zui, ...) and other OpenAPI-only keywords are ignored (strict: false).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import Ajv from 'ajv'
import addFormats from 'ajv-formats'
import { applyChatSpec } from './spec-chat.mjs'
import { applyTablesSpec } from './spec-tables.mjs'

const here = path.dirname(fileURLToPath(import.meta.url))
export const referencePath = path.resolve(here, '../../../shared/openapi/reference.json')

const DOC_ID = 'https://conformance.local/reference.json'

// toJSONSchema rewrites OpenAPI 3.0 nullable schemas in place, everywhere.
export function toJSONSchema(node) {
  if (Array.isArray(node)) {
    node.forEach(toJSONSchema)
    return node
  }
  if (node === null || typeof node !== 'object') return node
  for (const v of Object.values(node)) toJSONSchema(v)
  if (typeof node.nullable !== 'boolean') return node // absent, or a property named "nullable"
  const nullable = node.nullable === true
  delete node.nullable
  if (!nullable) return node
  if ('type' in node) {
    const types = Array.isArray(node.type) ? node.type : [node.type]
    if (!types.includes('null')) node.type = [...types, 'null']
    if (Array.isArray(node.enum) && !node.enum.includes(null)) node.enum = [...node.enum, null]
    return node
  }
  // No type: a bare {nullable: true} already accepts null. Anything else
  // ($ref, allOf, anyOf, oneOf, enum, ...) becomes "null or that".
  const rest = { ...node }
  for (const k of Object.keys(rest)) if (k.startsWith('x-') || k === 'description' || k === 'title') delete rest[k]
  if (Object.keys(rest).length === 0) return node
  for (const k of Object.keys(node)) delete node[k]
  node.anyOf = [{ type: 'null' }, rest]
  return node
}

let ajv
let doc
const validators = new Map()

function load() {
  if (ajv) return
  doc = JSON.parse(fs.readFileSync(referencePath, 'utf8'))
  applyChatSpec(doc)
  applyTablesSpec(doc)
  const root = toJSONSchema({
    $id: DOC_ID,
    components: { schemas: doc.components.schemas ?? {}, responses: doc.components.responses ?? {} },
  })
  ajv = new Ajv({ strict: false, allErrors: true, validateSchema: false, logger: false })
  addFormats(ajv)
  ajv.addSchema(root)
}

/** The reference's version (info.version). */
export function referenceVersion() {
  load()
  return doc.info.version
}

function pointerEscape(s) {
  return s.replace(/~/g, '~0').replace(/\//g, '~1')
}

/** validatorFor returns the compiled validator of operationId's 200 response. */
export function validatorFor(operationId) {
  load()
  let v = validators.get(operationId)
  if (v) return v
  const name = `${operationId}Response`
  const schema = doc.components.responses[name]?.content?.['application/json']?.schema
  assert.ok(schema, `reference.json has no components.responses.${name}.content["application/json"].schema`)
  const ref = `${DOC_ID}#/components/responses/${pointerEscape(name)}/content/${pointerEscape('application/json')}/schema`
  v = ajv.getSchema(ref)
  assert.ok(v, `Ajv could not resolve ${ref}`)
  validators.set(operationId, v)
  return v
}

/** schemaErrors returns the validation errors of body, or [] when it is valid. */
export function schemaErrors(operationId, body) {
  const v = validatorFor(operationId)
  return v(body) ? [] : v.errors.map((e) => ({ ...e }))
}

function describe(e, body) {
  let at = body
  for (const part of e.instancePath.split('/').slice(1)) {
    at = at?.[part.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  const got = at === undefined ? 'undefined' : JSON.stringify(at)
  const params = JSON.stringify(e.params)
  return `  ${e.instancePath || '(root)'} ${e.message} ${params} — got ${got?.length > 200 ? got.slice(0, 200) + '…' : got} (schema ${e.schemaPath})`
}

/**
 * expectValid asserts that response (the parsed body the official client
 * returned) matches the reference response schema of operationId, and
 * returns it.
 */
export function expectValid(operationId, response) {
  const errors = schemaErrors(operationId, response)
  if (errors.length > 0) {
    const lines = errors.map((e) => describe(e, response))
    assert.fail(
      `${operationId}: the response does not match components.responses.${operationId}Response ` +
        `of the reference (${errors.length} error${errors.length > 1 ? 's' : ''}):\n${lines.join('\n')}\n` +
        `body: ${JSON.stringify(response)}`,
    )
  }
  return response
}
