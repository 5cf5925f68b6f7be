// What the interface definitions use of @botpress/sdk (7.2.x): zui's z,
// messages, WELL_KNOWN_ATTRIBUTES and InterfaceDefinition, whose constructor calls
// each schema function with references to the interface's entities
// (packages/sdk/src/interface/definition.ts).
import { z } from '@bpinternal/zui'

export { z }

// The SDK's message types (hitl's channel), copied from
// packages/sdk/src/message.ts with its zui import pointed at zui.
export * as messages from './sdk-messages.ts'

export const WELL_KNOWN_ATTRIBUTES = {
  HIDDEN_IN_STUDIO: { bpActionHiddenInStudio: 'true' },
  AWAIT_RETURN: { bpActionAwaitReturn: 'true' },
}

const mapValues = (obj, f) => Object.fromEntries(Object.entries(obj ?? {}).map(([k, v]) => [k, f(v, k)]))

export class InterfaceDefinition {
  constructor(props) {
    this.props = props
    this.name = props.name
    this.version = props.version
    this.title = props.title
    this.description = props.description
    this.attributes = props.attributes
    this.entities = props.entities ?? {}
    this.__advanced = props.__advanced
    const refs = mapValues(this.entities, (entity, name) => {
      let ref = z.ref(name)
      const title = entity.schema._def['x-zui']?.title
      const description = entity.schema._def.description
      if (title) ref = ref.title(title)
      if (description) ref = ref.describe(description)
      return ref
    })
    this.events = mapValues(props.events, (e) => ({ ...e, schema: e.schema(refs) }))
    this.actions = mapValues(props.actions, (a) => ({
      ...a,
      input: { ...a.input, schema: a.input.schema(refs) },
      output: { ...a.output, schema: a.output.schema(refs) },
    }))
    this.channels = mapValues(props.channels, (c) => ({
      ...c,
      messages: mapValues(c.messages, (m) => ({ ...m, schema: m.schema(refs) })),
    }))
  }
}
