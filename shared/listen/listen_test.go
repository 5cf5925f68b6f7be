package listen

import "testing"

// TestHub: a frame reaches every subscriber of its topic and no other; a
// subscriber that falls Buffer frames behind is dropped, not waited for;
// CloseTopic ends a topic's subscriptions.
func TestHub(t *testing.T) {
	h := NewHub()
	a, b, other := h.Subscribe("conv:1"), h.Subscribe("conv:1", "install:x"), h.Subscribe("conv:2")
	if n := h.Publish("conv:1", []byte("f1")); n != 2 {
		t.Fatalf("published to %d, want 2", n)
	}
	if string(<-a.C) != "f1" || string(<-b.C) != "f1" || len(other.C) != 0 {
		t.Fatal("a frame reached the wrong subscribers")
	}
	for i := 0; i < Buffer; i++ {
		h.Publish("conv:2", []byte("x"))
	}
	if other.Lost() {
		t.Fatal("dropped before its buffer was full")
	}
	if n := h.Publish("conv:2", []byte("one too many")); n != 0 || !other.Lost() {
		t.Fatalf("a full subscriber: got %d, lost %v", n, other.Lost())
	}
	h.CloseTopic("install:x")
	if _, open := <-b.C; open {
		t.Fatal("CloseTopic left the subscriber open")
	}
	if h.Listeners() != 1 {
		t.Fatalf("listeners: %d, want 1", h.Listeners())
	}
	a.Close()
	a.Close() // idempotent
	if h.Listeners() != 0 || h.Publish("conv:1", []byte("f")) != 0 {
		t.Fatal("a closed subscriber still counted")
	}
}
