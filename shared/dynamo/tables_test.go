package dynamo

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/botforge/platform/shared/platform"
)

// TestDecodeRowDoc: the fast decoder of row documents reads what
// encodeDoc writes exactly as encoding/json does, and gives up (to
// encoding/json) on anything else.
func TestDecodeRowDoc(t *testing.T) {
	rows := []platform.TableRow{
		{ID: 1, CreatedAt: "2024-01-01T00:00:00.000Z", UpdatedAt: "2024-01-01T00:00:00.000Z", Values: map[string]json.RawMessage{}},
		{ID: 2147483647, CreatedAt: "a", UpdatedAt: "b", Values: map[string]json.RawMessage{
			"c1": json.RawMessage(`"x \"quoted\" \\ <b>&amp;\u2028 é"`),
			"c2": json.RawMessage(`-1.5e+300`),
			"c3": json.RawMessage(`{"a":[1,{"b":"}],{"}],"c":null,"d":true,"e":false}`),
			"c4": json.RawMessage(`[]`),
			"c5": json.RawMessage(`null`),
			"c6": json.RawMessage(`{}`),
		}, Computed: map[string]platform.ComputedCell{"c1": {Status: "stale", UpdatedAt: "x", Gen: 2}}},
	}
	for _, r := range rows {
		doc, err := encodeDoc(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := decodeRowDoc([]byte(doc))
		if !ok {
			t.Fatalf("fast decoder gave up on %s", doc)
		}
		var want platform.TableRow
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded\n%+v\nwant\n%+v", got, want)
		}
	}
	for _, doc := range []string{
		``, `{`, `{"id":1`, `{"id":"x"}`, `{"v":{"c1":}}`, `{"v":{"c1":1 }}`, `{ "id":1}`, `{"id":1,"other":2}`,
		`{"createdAt":"a\"b"}`, `{"v":{"c1":"unterminated}}`, `{"v":{"c1":[1,2}}`, `{"id":1}x`,
	} {
		if _, ok := decodeRowDoc([]byte(doc)); ok {
			t.Errorf("fast decoder accepted %q", doc)
		}
	}
}
