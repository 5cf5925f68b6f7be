// Package chatapi is the built-in `chat` integration (shared/builtin): the
// Chat API that the official end-user client @botpress/chat 0.5.5 speaks,
// served under the installation's webhook URL, so that
// Client.connect({apiUrl: webhookUrl}) works unchanged (docs/chat-api.md).
//
// It keeps nothing of its own: users, conversations, participants,
// messages and events are the bot's, written through the platform's Chat
// API in-process as the installation (builtin.API), so the bot gets the
// users' messages as any channel's and its replies come back through the
// dispatcher (SendMessage), which hands them to the conversation's
// listeners. The ids the client sees for users and conversations are the
// records' `fid` tag (the id the client chose, or one made here); messages
// and events keep the platform's ids.
package chatapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/platform"
)

// Name and Version of the published integration, and ClientVersion, the
// @botpress/chat whose Chat API it serves. Version changes with the
// definition (a published version is never rewritten, docs/builtin.md):
// 0.5.5 had no action, a bare custom event and no limits in its
// configuration; 0.6.0 has Botpress's action sendEvent, its custom event
// {userId, conversationId, payload} and the configuration's limits.
// Installations of 0.5.5 keep working (served by name) without the action,
// with the default limits, until the bot moves to 0.6.0.
const (
	Name          = "chat"
	Version       = "0.6.0"
	ClientVersion = "0.5.5"
)

// Limits of one user key.
const (
	// MaxBody caps a request body (a message's payload, a user's profile).
	MaxBody = 64 << 10
	// MaxListeners is how many streams one key may hold open at once,
	// across the platform (the shared limits).
	MaxListeners = 5
)

// Limits held across the whole platform (platform.SharedLimits: the
// table), per installation (docs/chat-api.md "Limits").
var (
	// MaxStreamsPerAddress is how many streams one client address may
	// hold open at once.
	MaxStreamsPerAddress int64 = 100
	// MaxStreams is how many streams the installation may hold open.
	MaxStreams int64 = 10000
	// UsersWindow is the fixed window of the user-creation limits.
	UsersWindow = 10 * time.Minute
	// MaxUsersPerAddress is how many anonymous users (POST /users) one
	// client address may create per UsersWindow.
	MaxUsersPerAddress int64 = 100
	// MaxUsers is how many anonymous users the installation may create
	// per UsersWindow.
	MaxUsers int64 = 10000
)

// RatePerSecond and Burst bound a key's requests (a token bucket, per
// process: a request rate, which every API function also bounds).
var (
	RatePerSecond = 20.0
	Burst         = 100
)

// Stream timing: the client's watchdog drops a stream silent for 60 s, so
// a ping (an SSE message) goes every 30 s, as on Botpress Cloud; Node's
// default HTTP agent drops a socket idle for 5 s, so a comment line keeps
// it busy every KeepAlive.
var (
	PingEvery  = 30 * time.Second
	KeepAlive  = 3 * time.Second
	CheckEvery = 10 * time.Second // how often a stream's installation is checked again
)

// Hub is what the integration needs of a listener hub: streams
// subscribe to topics, the API publishes signals and closes topics.
// *listen.Hub is the in-process one (the local platform); on AWS,
// shared/chatrelay relays publications through the table so that a
// signal published by any function reaches the streams another holds.
type Hub interface {
	Subscribe(topics ...string) *listen.Sub
	Publish(topic string, frame []byte) int
	CloseTopic(topic string)
}

// Integration is the chat integration. Its listener hub may be shared
// with other APIs that hold streams (a webchat API).
type Integration struct {
	Hub Hub
	// Limits count the streams and user creations across the platform
	// (the store's: shared/dynamo); nil: streams per key are counted in
	// this process only, creations not at all.
	Limits platform.SharedLimits

	mu      sync.Mutex
	buckets map[string]*bucket // webhookId + key: the key's rate
	streams map[string]int     // webhookId + user fid: open streams
	users   *idCache           // webhookId + fid -> platform user id
	convs   *idCache           // webhookId + fid -> platform conversation id
	fids    *idCache           // webhookId + platform user id -> fid
	checks  sync.Map           // webhookId -> *installCheck
}

// New returns the chat integration over hub (nil: a hub of its own) and
// the platform's shared limits.
func New(hub Hub, limits platform.SharedLimits) *Integration {
	if hub == nil || hub == Hub((*listen.Hub)(nil)) {
		hub = listen.NewHub()
	}
	return &Integration{Hub: hub, Limits: limits, buckets: map[string]*bucket{}, streams: map[string]int{},
		users: newIDCache(), convs: newIDCache(), fids: newIDCache()}
}

var messageTypes = []string{"text", "markdown", "image", "audio", "video", "file", "location", "card", "carousel", "choice", "dropdown", "bloc"}

// Definition is the published version.
func (*Integration) Definition() platform.Integration {
	msgs := map[string]any{}
	for _, t := range messageTypes {
		msgs[t] = map[string]any{"schema": map[string]any{"type": "object", "additionalProperties": true}}
	}
	channel, _ := json.Marshal(map[string]any{
		"title": "Chat", "messages": msgs,
		"message":      map[string]any{"tags": map[string]any{}},
		"conversation": map[string]any{"tags": map[string]any{"fid": map[string]any{"title": "Chat API id"}, "owner": map[string]any{"title": "Creator's Chat API id"}}, "creation": map[string]any{"enabled": false, "requiredTags": []string{}}},
	})
	return platform.Integration{
		Name: Name, Version: Version, Title: "Chat",
		Description: "The Chat API of @botpress/chat, served by the platform: end users talk to the bot from any program or web page.",
		Configuration: json.RawMessage(`{"identifier":{"required":false},"schema":{"type":"object","properties":{` +
			`"encryptionKey":{"type":"string","minLength":1,"description":"Personal mode: the clients sign their own user keys (HS256) with this key, and POST /users is refused."},` +
			`"allowedOrigins":{"type":"array","items":{"type":"string"},"description":"Browser origins (scheme://host[:port]) allowed to call this installation's Chat API; none: no browser page may."},` +
			LimitsSchema +
			`},"additionalProperties":false}}`),
		Channels: map[string]json.RawMessage{"channel": channel},
		Events: map[string]json.RawMessage{"custom": json.RawMessage(`{"title":"Custom event","description":"An event sent by a Chat API client (createEvent): the user's and the conversation's ids (the bot's) and the client's payload",` +
			`"schema":{"type":"object","properties":{"userId":{"type":"string"},"conversationId":{"type":"string"},"payload":{"type":"object","additionalProperties":true}},"required":["userId","conversationId","payload"]}}`)},
		Actions: map[string]json.RawMessage{"sendEvent": json.RawMessage(`{"title":"Send Custom Event","description":"Send a custom event from the bot to the Chat API clients of a conversation (signal event_created)",` +
			`"input":{"schema":{"type":"object","properties":{"conversationId":{"type":"string","minLength":1,"description":"The bot's id of the conversation"},"payload":{"type":"object","additionalProperties":true,"description":"The event's data"}},"required":["conversationId","payload"],"additionalProperties":false}},` +
			`"output":{"schema":{"type":"object","properties":{}}}}`)},
		User: json.RawMessage(`{"tags":{"fid":{"title":"Chat API id"},"profile":{"title":"Profile"}},"creation":{"enabled":false,"requiredTags":[]}}`),
	}
}

// LimitsSchema is the "limits" property of the configuration (the chat
// and webchat integrations'): the installation's own values of the limits
// held across the platform, in place of the defaults.
var LimitsSchema = fmt.Sprintf(`"limits":{"type":"object","additionalProperties":false,"description":"This installation's limits, held across the platform (unset: the defaults).","properties":{`+
	`"usersPerAddress":{"type":"integer","minimum":1,"maximum":1000000000,"description":"Anonymous users (POST /users, a webchat without a key) one client address may create every %s (default %d)."},`+
	`"users":{"type":"integer","minimum":1,"maximum":1000000000,"description":"Anonymous users the installation may create every %s (default %d)."},`+
	`"streamsPerAddress":{"type":"integer","minimum":1,"maximum":1000000000,"description":"Streams one client address may hold open at once (default %d)."},`+
	`"streams":{"type":"integer","minimum":1,"maximum":1000000000,"description":"Streams the installation may hold open at once (default %d)."}}}`,
	UsersWindow, MaxUsersPerAddress, UsersWindow, MaxUsers, MaxStreamsPerAddress, MaxStreams)

// config is an installation's configuration.
type config struct {
	EncryptionKey  string   `json:"encryptionKey"`
	AllowedOrigins []string `json:"allowedOrigins"`
	Limits         struct {
		UsersPerAddress   int64 `json:"usersPerAddress"`
		Users             int64 `json:"users"`
		StreamsPerAddress int64 `json:"streamsPerAddress"`
		Streams           int64 `json:"streams"`
	} `json:"limits"`
}

// or is v when the configuration sets it, else the default def.
func or(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

func configOf(in builtin.Install) config {
	var c config
	_ = json.Unmarshal(in.Instance.Configuration, &c)
	return c
}

// personal: the clients sign their own keys.
func (c config) personal() bool { return c.EncryptionKey != "" }

// Register has nothing to set up: keys are signed with a secret derived
// from the integration's signing secret and the installation's webhook id.
func (*Integration) Register(context.Context, builtin.Install) error { return nil }

// Unregister closes the installation's streams held by this process.
func (ci *Integration) Unregister(_ context.Context, in builtin.Install) error {
	ci.Hub.CloseTopic(installTopic(in.Instance.WebhookID))
	return nil
}

func installTopic(webhookID string) string { return "install:" + webhookID }
func convTopic(convID string) string       { return "conv:" + convID }

// memberTopic is user userID's streams of conversation convID: closed when
// the user is removed from it. Nothing is published on it.
func memberTopic(convID, userID string) string { return "member:" + convID + ":" + userID }

// allowOrigin answers whether a browser page of origin may call the
// installation (its allowedOrigins: exact, or "*").
func allowOrigin(c config, origin string) bool {
	for _, o := range c.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// bucket is a token bucket.
type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes a token of key's bucket.
func (ci *Integration) allow(key string) bool {
	now := time.Now()
	ci.mu.Lock()
	defer ci.mu.Unlock()
	b := ci.buckets[key]
	if b == nil {
		if len(ci.buckets) > 100000 {
			// Forget idle buckets (full again by now) rather than grow.
			for k, v := range ci.buckets {
				if now.Sub(v.last).Seconds() > float64(Burst)/RatePerSecond {
					delete(ci.buckets, k)
				}
			}
		}
		b = &bucket{tokens: float64(Burst), last: now}
		ci.buckets[key] = b
	}
	b.tokens = min(float64(Burst), b.tokens+now.Sub(b.last).Seconds()*RatePerSecond)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// openStream counts a stream of a user; false past MaxListeners.
func (ci *Integration) openStream(key string) bool {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	if ci.streams[key] >= MaxListeners {
		return false
	}
	ci.streams[key]++
	return true
}

func (ci *Integration) closeStream(key string) {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	if ci.streams[key]--; ci.streams[key] <= 0 {
		delete(ci.streams, key)
	}
}

// installCheck caches whether an installation is still enabled, so that
// all its streams share one read every CheckEvery.
type installCheck struct {
	mu      sync.Mutex
	at      time.Time
	enabled bool
}

// stillEnabled reports whether the installation is still enabled (under
// the same webhook id), reading it at most once per CheckEvery per process.
func (ci *Integration) stillEnabled(ctx context.Context, in builtin.Install) bool {
	v, _ := ci.checks.LoadOrStore(in.Instance.WebhookID, &installCheck{})
	c := v.(*installCheck)
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < CheckEvery && !c.at.IsZero() {
		return c.enabled
	}
	var cur platform.IntegrationInstance
	var ok bool
	err := builtin.OnFreshStack(func() (err error) {
		cur, ok, err = in.API.Installation(ctx, in)
		return err
	})
	if err != nil {
		return true // unknown: keep the stream; the next check decides
	}
	c.at, c.enabled = time.Now(), ok && cur.Enabled
	return c.enabled
}
