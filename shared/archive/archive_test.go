package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readAll(t *testing.T, b []byte) ([]Entry, error) {
	t.Helper()
	rd, err := NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	var out []Entry
	for {
		e, err := rd.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// TestArchive: entries read back as written (an & stays an &: the
// checksum is of the bytes written); a changed byte, a missing end line,
// a gap or a resumed writer's cut page are told.
func TestArchive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.bfa")
	w, err := Create(p, Header{Source: Source{APIURL: "http://x", WorkspaceID: "w"}})
	if err != nil {
		t.Fatal(err)
	}
	w.Add("user", "bot_1", "u1", json.RawMessage(`{"id": "u1", "url": "a?b=1&c=<2>"}`))
	off, seq, err := w.Commit()
	if err != nil || seq != 1 {
		t.Fatal(err, seq)
	}
	w.Add("user", "bot_1", "u2", json.RawMessage(`{"id":"u2"}`)) // a page never committed
	w.Close()
	// Resumed: the uncommitted page is cut off.
	w, err = Resume(p, off, seq)
	if err != nil {
		t.Fatal(err)
	}
	w.Add("user", "bot_1", "u3", json.RawMessage(`{"id":"u3"}`))
	if err := w.Finish([]string{"note"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	es, err := readAll(t, b)
	if err != nil || len(es) != 2 || es[0].ID != "u1" || es[1].ID != "u3" || es[1].Seq != 2 {
		t.Fatalf("read back: %v %+v", err, es)
	}
	if !strings.Contains(string(es[0].Data), "&c=<2>") {
		t.Fatalf("data escaped: %s", es[0].Data)
	}
	bad := bytes.Replace(b, []byte(`"u3"}`), []byte(`"u4"}`), 1)
	if _, err := readAll(t, bad); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a changed entry: %v", err)
	}
	cut := b[:bytes.LastIndex(b[:len(b)-1], []byte("\n"))+1]
	if _, err := readAll(t, cut); !errors.Is(err, ErrIncomplete) {
		t.Fatalf("no end line: %v", err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	gap := append(append([]byte{}, lines[0]...), lines[2]...)
	if _, err := readAll(t, gap); err == nil {
		t.Fatal("a gap in the sequence is not told")
	}
	if _, err := readAll(t, []byte(`{"format":"other","version":1}`+"\n")); err == nil {
		t.Fatal("another format is read")
	}
	if _, err := readAll(t, []byte(`{"format":"botforge-archive","version":2}`+"\n")); err == nil {
		t.Fatal("a later version is read")
	}
}

func TestSecrets(t *testing.T) {
	s, info, err := NewSecrets("right")
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := s.SealJSON(json.RawMessage(`{"apiKey":"k"}`))
	if err != nil || strings.Contains(string(sealed), "apiKey") {
		t.Fatalf("sealed: %s %v", sealed, err)
	}
	if _, err := OpenSecrets("wrong", info); !errors.Is(err, ErrPassphrase) {
		t.Fatalf("a wrong passphrase: %v", err)
	}
	o, err := OpenSecrets("right", info)
	if err != nil {
		t.Fatal(err)
	}
	var str string
	json.Unmarshal(sealed, &str)
	plain, err := o.Open(str)
	if err != nil || string(plain) != `{"apiKey":"k"}` {
		t.Fatalf("opened: %s %v", plain, err)
	}
}
