package httpapi

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/platform"
)

// stateTarget reads the state a call names (type, id and name of the path)
// and its declaration in the bot definition. An unknown type, an
// undeclared name or a payload failing the declared schema is a 400; an id
// naming nothing of that type in the bot is a 404.
func (s *server) stateTarget(c *call) (platform.StateKey, chat.Declaration, error) {
	typ := platform.StateType(c.PathValue("type"))
	k := platform.StateKey{BotID: c.bot.ID, Type: typ, OwnerID: c.PathValue("id"), Name: c.PathValue("name")}
	d, err := chat.Declared(c.bot.States, typ, k.Name)
	if err != nil {
		return k, d, err
	}
	switch typ {
	case platform.StateConversation:
		err = checkID("conversation", k.OwnerID, platform.PrefixConversation)
	case platform.StateUser:
		err = checkID("user", k.OwnerID, platform.PrefixUser)
	case platform.StateBot:
		if k.OwnerID != c.bot.ID {
			err = platform.NotFound("bot", k.OwnerID)
		}
	case platform.StateIntegration:
		if !installed(c.bot.Bot, k.OwnerID) {
			err = platform.NotFound("integration", k.OwnerID)
		}
	}
	return k, d, err
}

// installed reports whether the bot has the integration id (an integration
// id or an installation's alias) installed.
func installed(b platform.Bot, id string) bool {
	if _, ok := b.Installs[id]; ok {
		return true
	}
	for _, in := range b.Installs {
		if in.IntegrationID == id {
			return true
		}
	}
	return false
}

// newState is a state of k with payload, created now.
func newState(k platform.StateKey, payload json.RawMessage, expiry *int64, now time.Time) *platform.State {
	st := &platform.State{
		ID: platform.NewID(platform.PrefixState), CreatedAt: platform.FormatTime(now),
		BotID: k.BotID, Name: k.Name, Type: k.Type, Payload: payload, Expiry: expiry,
	}
	switch k.Type {
	case platform.StateConversation:
		st.ConversationID = k.OwnerID
	case platform.StateUser:
		st.UserID = k.OwnerID
	}
	touch(st, now)
	return st
}

// touch marks a state written now: its idle expiry starts again.
func touch(st *platform.State, now time.Time) {
	st.UpdatedAt = platform.FormatTime(now)
	st.ExpiresAt = ""
	if st.Expiry != nil {
		st.ExpiresAt = platform.FormatTime(now.Add(time.Duration(*st.Expiry) * time.Millisecond))
	}
}

// expiryField reads an optional, nullable expiry (milliseconds): set tells
// whether it was given; v is nil for null.
func expiryField(raw json.RawMessage) (v *int64, set bool, err error) {
	if raw == nil {
		return nil, false, nil
	}
	var ms *float64
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, false, platform.Invalid("invalid body: field %q: expected a number or null", "expiry")
	}
	return chat.ExpiryMillis(ms), true, nil
}

func nullPayload(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func stateAnswer(st *platform.State, withMeta bool) map[string]any {
	out := map[string]any{"state": st}
	if withMeta {
		out["meta"] = map[string]bool{"cached": false}
	}
	return out
}

func (s *server) getState(c *call) (any, error) {
	k, _, err := s.stateTarget(c)
	if err != nil {
		return nil, err
	}
	st, err := s.Store.GetState(c.ctx, k)
	if err != nil {
		return nil, err
	}
	return stateAnswer(&st, true), nil
}

// stateWrite is a setState or getOrSetState call: the state named, its
// declaration, and the body's payload and expiry (expirySet: given, maybe
// as null).
type stateWrite struct {
	key       platform.StateKey
	decl      chat.Declaration
	payload   json.RawMessage
	expiry    *int64
	expirySet bool
}

func (s *server) readStateWrite(c *call) (stateWrite, error) {
	var in struct {
		Payload json.RawMessage `json:"payload"`
		Expiry  json.RawMessage `json:"expiry"`
	}
	if err := c.decode(&in); err != nil {
		return stateWrite{}, err
	}
	k, d, err := s.stateTarget(c)
	if err != nil {
		return stateWrite{}, err
	}
	expiry, set, err := expiryField(in.Expiry)
	return stateWrite{key: k, decl: d, payload: in.Payload, expiry: expiry, expirySet: set}, err
}

// setState replaces a state's payload (creating the state). A null payload
// deletes the state; the answer is then the state as it was, with an empty
// payload. Without an expiry in the body, a state keeps its expiry, and a new
// one gets the declared default.
func (s *server) setState(c *call) (any, error) {
	in, err := s.readStateWrite(c)
	if err != nil {
		return nil, err
	}
	k, d, expiry, expirySet := in.key, in.decl, in.expiry, in.expirySet
	now := platform.Clock()
	if nullPayload(in.payload) {
		var gone *platform.State
		_, err := s.Store.WriteState(c.ctx, k, func(old *platform.State) (*platform.State, error) {
			gone = old
			return nil, nil
		})
		if err != nil {
			return nil, err
		}
		if gone == nil {
			gone = newState(k, nil, nil, now)
		}
		gone.Payload = json.RawMessage("{}")
		return stateAnswer(gone, false), nil
	}
	if err := d.Validate(k.Name, in.payload); err != nil {
		return nil, err
	}
	st, err := s.Store.WriteState(c.ctx, k, func(old *platform.State) (*platform.State, error) {
		if old == nil {
			if !expirySet {
				expiry = d.DefaultExpiry()
			}
			return newState(k, in.payload, expiry, now), nil
		}
		next := *old
		next.Payload = in.payload
		if expirySet {
			next.Expiry = expiry
		}
		touch(&next, now)
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	return stateAnswer(st, false), nil
}

// patchState sets the passed top-level keys of an existing state's payload;
// the merged payload must match the declared schema. Parallel patches of
// different keys all land (each write is conditional on the version read).
func (s *server) patchState(c *call) (any, error) {
	var in struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	k, d, err := s.stateTarget(c)
	if err != nil {
		return nil, err
	}
	return s.changeState(c, k, func(next *platform.State) error {
		merged, err := chat.MergePayload(next.Payload, in.Payload)
		if err != nil {
			return err
		}
		if err := d.Validate(k.Name, merged); err != nil {
			return err
		}
		next.Payload = merged
		return nil
	})
}

// getOrSetState answers the state, creating it with the body's payload when
// it does not exist (or has expired).
func (s *server) getOrSetState(c *call) (any, error) {
	in, err := s.readStateWrite(c)
	if err != nil {
		return nil, err
	}
	k, d, expiry, expirySet := in.key, in.decl, in.expiry, in.expirySet
	if err := d.Validate(k.Name, in.payload); err != nil {
		return nil, err
	}
	if !expirySet {
		expiry = d.DefaultExpiry()
	}
	st, err := s.Store.WriteState(c.ctx, k, func(old *platform.State) (*platform.State, error) {
		if old != nil {
			return old, nil
		}
		return newState(k, in.payload, expiry, platform.Clock()), nil
	})
	if err != nil {
		return nil, err
	}
	return stateAnswer(st, true), nil
}

// setStateExpiry sets (or, with null, removes) an existing state's expiry,
// counted from now.
func (s *server) setStateExpiry(c *call) (any, error) {
	var in struct {
		Expiry json.RawMessage `json:"expiry"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	k, _, err := s.stateTarget(c)
	if err != nil {
		return nil, err
	}
	expiry, _, err := expiryField(in.Expiry)
	if err != nil {
		return nil, err
	}
	return s.changeState(c, k, func(next *platform.State) error {
		next.Expiry = expiry
		return nil
	})
}

// changeState rewrites an existing state (404 when there is none) with
// change applied to a copy; the write restarts its idle expiry.
func (s *server) changeState(c *call, k platform.StateKey, change func(next *platform.State) error) (any, error) {
	st, err := s.Store.WriteState(c.ctx, k, func(old *platform.State) (*platform.State, error) {
		if old == nil {
			return nil, platform.NotFound("state", k.Name)
		}
		next := *old
		if err := change(&next); err != nil {
			return nil, err
		}
		touch(&next, platform.Clock())
		return &next, nil
	})
	if err != nil {
		return nil, err
	}
	return stateAnswer(st, false), nil
}
