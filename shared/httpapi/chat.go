package httpapi

import (
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// chatRoutes is the route table of the Chat API: conversations, participants,
// users, messages, events and states of the bot named by x-bot-id (see
// docs/chat.md). Every operation is bot-scoped; reads need the viewer role,
// writes developer (a bot's own API key has developer rights on it).
func (s *server) chatRoutes() []route {
	const (
		viewer    = platform.RoleViewer
		developer = platform.RoleDeveloper
		created   = 201
	)
	r := func(pattern, op string, role platform.Role, status int, h func(*call) (any, error)) route {
		return route{pattern: pattern, op: op, scope: scopeBot, role: role, status: status, handle: h}
	}
	return []route{
		// Conversations (handlers in chat_conversations.go).
		r("POST /v1/chat/conversations", "createConversation", developer, created, s.createConversation),
		r("GET /v1/chat/conversations", "listConversations", viewer, 0, s.listConversations),
		r("GET /v1/chat/conversations/{id}", "getConversation", viewer, 0, s.getConversation),
		r("PUT /v1/chat/conversations/{id}", "updateConversation", developer, 0, s.updateConversation),
		r("DELETE /v1/chat/conversations/{id}", "deleteConversation", developer, 0, s.deleteConversation),
		r("POST /v1/chat/conversations/get-or-create", "getOrCreateConversation", developer, 0, s.getOrCreateConversation),

		// Participants (chat_conversations.go).
		r("GET /v1/chat/conversations/{id}/participants", "listParticipants", viewer, 0, s.listParticipants),
		r("POST /v1/chat/conversations/{id}/participants", "addParticipant", developer, 0, s.addParticipant),
		r("GET /v1/chat/conversations/{id}/participants/{userId}", "getParticipant", viewer, 0, s.getParticipant),
		r("DELETE /v1/chat/conversations/{id}/participants/{userId}", "removeParticipant", developer, 0, s.removeParticipant),

		// Users (chat_users.go).
		r("POST /v1/chat/users", "createUser", developer, created, s.createUser),
		r("GET /v1/chat/users", "listUsers", viewer, 0, s.listUsers),
		r("GET /v1/chat/users/{id}", "getUser", viewer, 0, s.getUser),
		r("PUT /v1/chat/users/{id}", "updateUser", developer, 0, s.updateUser),
		r("DELETE /v1/chat/users/{id}", "deleteUser", developer, 0, s.deleteUser),
		r("POST /v1/chat/users/get-or-create", "getOrCreateUser", developer, 0, s.getOrCreateUser),

		// Messages (chat_messages.go).
		r("POST /v1/chat/messages", "createMessage", developer, created, s.createMessage),
		r("GET /v1/chat/messages", "listMessages", viewer, 0, s.listMessages),
		r("POST /v1/chat/messages/get-or-create", "getOrCreateMessage", developer, 0, s.getOrCreateMessage),
		r("POST /v1/chat/messages/import-messages", "importMessages", developer, 0, s.importMessages),
		r("GET /v1/chat/messages/{id}", "getMessage", viewer, 0, s.getMessage),
		r("PUT /v1/chat/messages/{id}", "updateMessage", developer, 0, s.updateMessage),
		r("DELETE /v1/chat/messages/{id}", "deleteMessage", developer, 0, s.deleteMessage),

		// Events (chat_events.go).
		r("POST /v1/chat/events", "createEvent", developer, created, s.createEvent),
		r("GET /v1/chat/events", "listEvents", viewer, 0, s.listEvents),
		r("GET /v1/chat/events/{id}", "getEvent", viewer, 0, s.getEvent),
		r("DELETE /v1/chat/events/scheduled/{id}", "cancelScheduledEvent", developer, 0, s.cancelScheduledEvent),
		// Workflows (chat_workflows.go).
		r("POST /v1/chat/workflows", "createWorkflow", developer, created, s.createWorkflow),
		r("GET /v1/chat/workflows", "listWorkflows", viewer, 0, s.listWorkflows),
		r("POST /v1/chat/workflows/get-or-create", "getOrCreateWorkflow", developer, 0, s.getOrCreateWorkflow),
		r("GET /v1/chat/workflows/{id}", "getWorkflow", viewer, 0, s.getWorkflow),
		r("PUT /v1/chat/workflows/{id}", "updateWorkflow", developer, 0, s.updateWorkflow),
		r("DELETE /v1/chat/workflows/{id}", "deleteWorkflow", developer, 0, s.deleteWorkflow),

		// Tasks (chat_tasks.go).
		r("POST /v1/chat/tasks", "createTask", developer, created, s.createTask),
		r("GET /v1/chat/tasks", "listTasks", viewer, 0, s.listTasks),
		r("GET /v1/chat/tasks/{id}", "getTask", viewer, 0, s.getTask),
		r("PUT /v1/chat/tasks/{id}", "updateTask", developer, 0, s.updateTask),
		r("DELETE /v1/chat/tasks/{id}", "deleteTask", developer, 0, s.deleteTask),

		// States (chat_states.go).
		r("GET /v1/chat/states/{type}/{id}/{name}", "getState", viewer, 0, s.getState),
		r("POST /v1/chat/states/{type}/{id}/{name}", "setState", developer, 0, s.setState),
		r("PATCH /v1/chat/states/{type}/{id}/{name}", "patchState", developer, 0, s.patchState),
		r("POST /v1/chat/states/{type}/{id}/{name}/get-or-set", "getOrSetState", developer, 0, s.getOrSetState),
		r("POST /v1/chat/states/{type}/{id}/{name}/expiry", "setStateExpiry", developer, 0, s.setStateExpiry),

		// Runtime operations of bots and integrations (chat_actions.go).
		r("POST /v1/chat/actions", "callAction", developer, 0, s.callAction),
		r("POST /v1/chat/integrations/configure", "configureIntegration", developer, 0, s.configureIntegration),
		r("POST /v1/chat/initialize-incoming-message", "initializeIncomingMessage", developer, 0, s.initializeIncomingMessage),

		// Tag values (below).
		r("GET /v1/chat/tags/{key}/values", "listTagValues", viewer, 0, s.listTagValues),
	}
}

// integrationOf names the integration a Chat call acts for: the body's
// (deprecated) integrationName, else the alias of the installation the
// call's x-integration-alias or x-integration-id names (chat_acting.go),
// else none.
func integrationOf(c *call, bodyName *string) string {
	if bodyName != nil && *bodyName != "" {
		return *bodyName
	}
	return c.acting
}

// bodyIntegration is integrationOf for a body that may name the
// integration. An integration's API key may only name one of its own
// installations on the bot (as its headers must, checkActingInstall):
// else it could open conversations, and so send the bot's messages,
// through another integration installed on the bot, or the console's
// emulator channel. Personal access tokens and bot keys act for the whole
// bot.
func bodyIntegration(c *call, bodyName *string) (string, error) {
	name := integrationOf(c, bodyName)
	if c.principal.Kind != platform.PrincipalIntegration || bodyName == nil || *bodyName == "" {
		return name, nil
	}
	if in, ok := c.bot.Installs[name]; ok && in.IntegrationID == c.principal.IntegrationID {
		return name, nil
	}
	return "", platform.Forbidden("integrationName %q is not an installation of this API key's integration on bot %q", name, c.bot.ID)
}

// byIntegration reports whether an integration is acting (for the bot).
func byIntegration(c *call) bool {
	return c.Header.Get("x-integration-id") != "" || c.Header.Get("x-integration-alias") != ""
}

// tagQuery reads the tags filter of a list, as the official client encodes
// it: tags.<name>=<value> (or tags[<name>]=<value>), each name once, values
// not empty.
func tagQuery(c *call) (map[string]string, error) {
	out := map[string]string{}
	for k, vs := range c.URL.Query() {
		var name string
		switch {
		case k == "tags" || k == "tags[]":
			return nil, platform.Invalid("query parameter %q: give tags as tags.<name>=<value>", k)
		case strings.HasPrefix(k, "tags."):
			name = k[len("tags."):]
		case strings.HasPrefix(k, "tags[") && strings.HasSuffix(k, "]"):
			name = k[len("tags[") : len(k)-1]
		default:
			continue
		}
		if name == "" {
			return nil, platform.Invalid("query parameter %q: a tag name must not be empty", k)
		}
		if len(vs) != 1 {
			return nil, platform.Invalid("query parameter %q must be given once", k)
		}
		if vs[0] == "" {
			return nil, platform.Invalid("query parameter %q: a tag value must not be empty", k)
		}
		if _, dup := out[name]; dup {
			return nil, platform.Invalid("tag %q is filtered twice", name)
		}
		out[name] = vs[0]
	}
	if err := chat.CheckTags(out); err != nil {
		return nil, platform.Invalid("query parameter %q: %v", "tags", err)
	}
	return out, nil
}

// listQuery reads an array parameter as the official client encodes it:
// repeated (name=a&name=b), also accepting name[]=a.
func listQuery(c *call, name string) ([]string, error) {
	q := c.URL.Query()
	vs := append(append([]string{}, q[name]...), q[name+"[]"]...)
	out := make([]string, 0, len(vs))
	seen := map[string]bool{}
	for _, v := range vs {
		if v == "" {
			return nil, platform.Invalid("query parameter %q: values must not be empty", name)
		}
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out, nil
}

// dateQuery reads an ISO 8601 time parameter in the stored format (UTC,
// milliseconds). A lower bound rounds up to the millisecond and an upper
// bound down, so both stay inclusive of exactly the instants they name.
func dateQuery(c *call, name string, upper bool) (string, error) {
	v, err := c.query().str(name)
	if err != nil || v == "" {
		return "", err
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return "", platform.Invalid("query parameter %q must be an ISO 8601 date-time (e.g. 2024-01-31T12:00:00.000Z)", name)
	}
	ms := t.Truncate(time.Millisecond)
	if !upper && ms.Before(t) {
		ms = ms.Add(time.Millisecond)
	}
	return platform.FormatTime(ms), nil
}

// countQuery reads a non-negative integer parameter (nil when absent).
func countQuery(c *call, name string) (*int64, error) {
	v, err := c.query().str(name)
	if err != nil || v == "" {
		return nil, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, platform.Invalid("query parameter %q must be a non-negative integer", name)
	}
	return &n, nil
}

// sortQuery reads the sortField (createdAt or updatedAt) and sortDirection
// (default desc) of a list.
func sortQuery(c *call) (byUpdatedAt, descending bool, err error) {
	q := c.query()
	field, err := q.oneOf("sortField", "createdAt", "createdAt", "updatedAt")
	if err != nil {
		return false, false, err
	}
	dir, err := q.oneOf("sortDirection", "desc", "asc", "desc")
	return field == "updatedAt", dir == "desc", err
}

// dateRangeQuery reads the inclusive afterDate and beforeDate bounds of a
// list (see dateQuery).
func dateRangeQuery(c *call) (after, before string, err error) {
	if after, err = dateQuery(c, "afterDate", false); err != nil {
		return "", "", err
	}
	before, err = dateQuery(c, "beforeDate", true)
	return after, before, err
}

// listPage answers one page of a list, under field, with the meta carrying
// the token of the next page; list names the list (its filters) so that a
// token only continues the list it was given for.
func listPage[T any](c *call, field, list string, read func(dynamo.Page) ([]T, map[string]string, error)) (any, error) {
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	items, next, err := read(p)
	if err != nil {
		return nil, err
	}
	return map[string]any{field: items, "meta": c.meta(list, next)}, nil
}

// conversationExists answers the 404 of a list filtered by a conversation
// that does not exist (no filter: nil).
func (s *server) conversationExists(c *call, id string) error {
	if id == "" {
		return nil
	}
	_, err := s.Store.GetConversation(c.ctx, c.bot.ID, id)
	return err
}

// checkID answers 404 for an id that cannot name a record of the kind, so
// the store is not asked.
func checkID(kind, id, prefix string) error {
	if !platform.HasPrefix(id, prefix) {
		return platform.NotFound(kind, id)
	}
	return nil
}

// --- Tag values ---

func (s *server) listTagValues(c *call) (any, error) {
	typ, err := c.query().oneOf("type", "", string(platform.TagsOfUser), string(platform.TagsOfConversation), string(platform.TagsOfMessage))
	if err != nil {
		return nil, err
	}
	if typ == "" {
		return nil, platform.Invalid("query parameter %q is required: user, conversation or message", "type")
	}
	tag := c.PathValue("key")
	type value struct {
		Value string `json:"value"`
	}
	return listPage(c, "tags", listKey(c.bot.ID, typ, tag), func(p dynamo.Page) ([]value, map[string]string, error) {
		values, next, err := s.Store.ListTagValues(c.ctx, c.bot.ID, platform.TagType(typ), tag, p)
		out := make([]value, 0, len(values))
		for _, v := range values {
			out = append(out, value{v})
		}
		return out, next, err
	})
}
