package chatapi

import "testing"

// TestRemovesListener: the frame that ends a removed user's stream is the
// participant_removed naming that user, and only it (on AWS it may reach
// the stream before the close of the user's member topic:
// TestRelayRemovedParticipant in shared/chatrelay).
func TestRemovesListener(t *testing.T) {
	for _, c := range []struct {
		name  string
		frame []byte
		want  bool
	}{
		{"its own removal", frame("participant_removed", map[string]any{"conversationId": "c", "participantId": "bob"}), true},
		{"another's removal", frame("participant_removed", map[string]any{"conversationId": "c", "participantId": "alice"}), false},
		{"a message saying it", frame("message_created", map[string]any{"payload": map[string]any{"text": `"participant_removed" bob`}, "participantId": "bob"}), false},
		{"a participant added", frame("participant_added", map[string]any{"conversationId": "c", "participantId": "bob"}), false},
		{"not JSON", []byte("event: message\ndata: \"participant_removed\" {\n\n"), false},
	} {
		if got := removesListener(c.frame, "bob"); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
