// Package listen fans signals out to the streams that listen for them, in
// process: a stream subscribes to topics (a conversation, a user), a
// publisher hands a frame to every subscriber of a topic. It knows nothing
// of the API that holds the streams: the Chat API (shared/chatapi) and a
// webchat API share one Hub.
//
// Delivery never blocks the publisher: each subscriber has a buffer, and a
// subscriber whose buffer is full (a stalled client) is dropped (its
// channel closed, Lost set), since a stream that misses a signal is worse
// than one that ends and is opened again.
package listen

import (
	"sync"
	"sync/atomic"
)

// Buffer is how many frames a subscriber may have waiting.
const Buffer = 64

// Hub is a set of topics and their subscribers.
type Hub struct {
	mu     sync.RWMutex
	topics map[string]map[*Sub]struct{}
	count  atomic.Int64
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{topics: map[string]map[*Sub]struct{}{}} }

// Sub is one subscriber: its frames arrive on C, in publication order per
// topic; C is closed when the subscriber is dropped (Close, or a full
// buffer: then Lost is true).
type Sub struct {
	C      chan []byte
	hub    *Hub
	topics []string
	once   sync.Once
	lost   atomic.Bool
	mu     sync.Mutex // guards sending on C against its closing
	closed bool
}

// Subscribe adds a subscriber to the given topics.
func (h *Hub) Subscribe(topics ...string) *Sub {
	s := &Sub{C: make(chan []byte, Buffer), hub: h, topics: topics}
	h.mu.Lock()
	for _, t := range topics {
		m := h.topics[t]
		if m == nil {
			m = map[*Sub]struct{}{}
			h.topics[t] = m
		}
		m[s] = struct{}{}
	}
	h.mu.Unlock()
	h.count.Add(1)
	return s
}

// Publish hands frame to every subscriber of topic and answers how many
// got it.
func (h *Hub) Publish(topic string, frame []byte) int {
	h.mu.RLock()
	subs := make([]*Sub, 0, len(h.topics[topic]))
	for s := range h.topics[topic] {
		subs = append(subs, s)
	}
	h.mu.RUnlock()
	n := 0
	for _, s := range subs {
		if s.send(frame) {
			n++
		}
	}
	return n
}

// Listeners is how many subscribers the hub holds.
func (h *Hub) Listeners() int { return int(h.count.Load()) }

// Subscribers is how many subscribers topic has (a hub that registers
// its topics elsewhere, shared/taskrelay, drops those with none).
func (h *Hub) Subscribers(topic string) int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.topics[topic])
}

// Close ends every subscription of topic (its conversation was deleted,
// its installation disabled): their channels are closed.
func (h *Hub) CloseTopic(topic string) {
	h.mu.RLock()
	subs := make([]*Sub, 0, len(h.topics[topic]))
	for s := range h.topics[topic] {
		subs = append(subs, s)
	}
	h.mu.RUnlock()
	for _, s := range subs {
		s.Close()
	}
}

func (s *Sub) send(frame []byte) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	select {
	case s.C <- frame:
		s.mu.Unlock()
		return true
	default:
	}
	s.mu.Unlock()
	s.lost.Store(true)
	s.Close()
	return false
}

// Lost reports whether the subscriber was dropped for falling behind.
func (s *Sub) Lost() bool { return s.lost.Load() }

// Close removes the subscriber from its topics and closes C (idempotent).
func (s *Sub) Close() {
	s.once.Do(func() {
		h := s.hub
		h.mu.Lock()
		for _, t := range s.topics {
			if m := h.topics[t]; m != nil {
				delete(m, s)
				if len(m) == 0 {
					delete(h.topics, t)
				}
			}
		}
		h.mu.Unlock()
		h.count.Add(-1)
		s.mu.Lock()
		s.closed = true
		close(s.C)
		s.mu.Unlock()
	})
}
