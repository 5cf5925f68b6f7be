// role.js: the signed-in account's role in a workspace, so pages show
// only what the role may do and say why a control is off (issue 30). The
// API still decides: every write is checked there (a 403 the console
// shows as before); this only spares people a refusal after the fact.
import { call, session } from './api.js'
import { html, useLoad } from './ui.js'

// RANK is Botpress's order of roles (shared/platform roleRank).
const RANK = { viewer: 1, billing: 2, developer: 3, manager: 4, administrator: 5, owner: 6 }

// NEED is the least role an action needs: the `role:` of its operation in
// the API's route tables (shared/httpapi admin.go, signin.go, tables.go,
// files.go); TestConsoleRolesMatchRoutes holds them in step.
export const NEED = {
  'creating bots': 'developer', // createBot
  "changing a bot's url": 'developer', // updateBot
  'saving and deploying versions': 'developer', // createBotVersion, deployBotVersion
  // Removing another member needs administrator too, checked in the
  // handler: deleteWorkspaceMember itself is open to any member leaving.
  'managing members': 'administrator', // createWorkspaceMember, updateWorkspaceMember
  'inviting people': 'administrator', // listWorkspaceInvitations, createWorkspaceInvitation, renewWorkspaceInvitation, deleteWorkspaceInvitation
  'changing tables and rows': 'developer', // createTable, createTableRows, updateTableRows, deleteTableRows, duplicateTable, importTable
  'uploading and deleting files': 'developer', // upsertFile, deleteFile
  'creating and changing assistants': 'developer', // createBot, updateBot, createKnowledgeBase, upsertFile
  'exporting bots and workspaces': 'developer', // startTransferExport
  'importing archives': 'administrator', // uploadTransferArchive, runTransferImport
  'changing workspace settings': 'administrator', // updateWorkspace
  'deleting the workspace': 'owner', // deleteWorkspace
  'seeing and changing billing': 'billing', // listWorkspaceInvoices, getUpcomingInvoice, changeAISpendQuota
  'managing bot API keys': 'developer', // listBotApiKeys, createBotApiKey, deleteBotApiKey
  'changing integrations': 'developer', // updateBot
  'talking to the bot in the emulator': 'developer', // createConversation, createMessage
  // The installation's PLATFORM_HITL_AGENT_ROLE (default developer):
  // inbox.js takes the installation's own from the agent API's list.
  'answering in the inbox': 'developer', // assignHitlSession, replyHitlSession, noteHitlSession, closeHitlSession
}

// The role is asked once per workspace and credentials (a sign-out and
// another sign-in in the same tab is another account): getWorkspaceMember
// (GET /v1/admin/workspace-members/me) answers the caller's own member.
const cache = new Map()
function myRole(ws) {
  const key = `${session.token || session.csrf}|${ws}`
  if (!cache.has(key)) {
    cache.set(key, call('GET', '/v1/admin/workspace-members/me', { ws }).catch(() => {
      cache.delete(key) // not known (yet): show everything, the API decides
      return {}
    }))
  }
  return cache.get(key)
}

// atLeast tells whether role ranks at least need (an unknown role: yes,
// the API decides).
export const atLeast = (role, need) => !role || !need || (RANK[role] || 0) >= (RANK[need] || 0)

// useRole answers {known (asked and answered), role, me (the member's id), may(action), why(action)}
// for a workspace. While
// the role is unknown every action is allowed: the API still refuses.
export function useRole(ws) {
  const st = useLoad(() => (ws ? myRole(ws) : Promise.resolve({})), [ws])
  const role = st.data?.role || ''
  const me = st.data?.id || ''
  const may = (action) => atLeast(role, NEED[action])
  const why = (action) => `Your role in this workspace is ${role}: ${action} needs ${NEED[action]} or above.`
  return { known: st.data !== undefined, role, me, may, why }
}

// Refused is the line saying why a role's controls are off (nothing when
// they are on).
export function Refused({ r, action }) {
  if (r.may(action)) return null
  return html`<p class="muted refused" data-test="refused">${r.why(action)}</p>`
}
