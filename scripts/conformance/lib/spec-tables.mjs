// What the specification (interface 1.108.0) says more than the reference
// (1.70.2) about the Tables API, applied to the reference document before
// the response schemas are compiled: a table schema's additionalProperties
// is a boolean (the reference only allows true), duplicateTable answers its
// job {id, status}, and table jobs may also be of the types duplicate_table
// and delete_rows (as in the client's version of the API). Mirrors
// shared/openapi/spec_tables.go.
export function applyTablesSpec(doc) {
  const comps = doc.components ?? {}
  const ap = comps.schemas?.Table?.properties?.schema?.properties?.additionalProperties
  if (ap) delete ap.enum
  const dup = comps.responses?.duplicateTableResponse?.content?.['application/json']?.schema
  if (dup?.properties) {
    dup.properties.job = {
      type: 'object',
      properties: { id: { type: 'string' }, status: { type: 'string' } },
      required: ['id', 'status'],
      additionalProperties: false,
    }
  }
  const types = ['export', 'import', 'clear_column', 'clear_vectors', 'delete_rows', 'duplicate_table']
  for (const op of ['exportTable', 'importTable']) {
    const t = comps.responses?.[`${op}Response`]?.content?.['application/json']?.schema?.properties?.job?.properties?.type
    if (t) t.enum = types
  }
  const jt = comps.responses?.getTableJobsResponse?.content?.['application/json']?.schema?.properties?.jobs?.items?.properties?.type
  if (jt) jt.enum = types
  return doc
}
