// What the specification (interface 1.108.0) says more than the reference
// (1.70.2) about the Chat API, applied to the reference document before the
// response schemas are compiled: a conversation's messageCount (always
// present) and properties, a state's expiry and expiresAt, and the
// meta.created flag of getOrCreateConversation. Mirrors
// shared/openapi/spec_chat.go.
export function applyChatSpec(doc) {
  const schemas = doc.components?.schemas ?? {}
  const set = (schema, name, def, required) => {
    if (!schema?.properties) return
    if (!(name in schema.properties)) schema.properties[name] = def
    if (required) {
      schema.required ??= []
      if (!schema.required.includes(name)) schema.required.push(name)
    }
  }
  set(schemas.Conversation, 'messageCount', { type: 'integer', minimum: 0 }, true)
  set(schemas.Conversation, 'properties', { type: 'object', additionalProperties: { type: 'string' } }, false)
  set(schemas.State, 'expiry', { type: 'integer', minimum: 1 }, false)
  set(schemas.State, 'expiresAt', { type: 'string', format: 'date-time' }, false)
  const goc = doc.components?.responses?.getOrCreateConversationResponse?.content?.['application/json']?.schema
  set(
    goc,
    'meta',
    { type: 'object', properties: { created: { type: 'boolean' } }, required: ['created'], additionalProperties: false },
    true,
  )
  return doc
}
