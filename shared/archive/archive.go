// Package archive is the portable archive format of a workspace or a bot
// (docs/export-import.md): newline-delimited JSON, a header line, one line
// per entry carrying the SHA-256 of its data, and an end line with the
// count of entries. Written and read as a stream, so memory stays flat
// whatever the archive's size; an export interrupted midway resumes from
// its journal (journal.go) without doubling or losing an entry.
package archive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Format and Version name this format; a reader refuses another format and
// a later version.
const (
	Format  = "botforge-archive"
	Version = 1
)

// Header is the first line of an archive.
type Header struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	CreatedAt string `json:"createdAt"`
	// Source says what was exported: the API's URL, the workspace and,
	// for a one-bot archive, the bot.
	Source Source `json:"source"`
	// Secrets describes how integration configurations are kept: absent,
	// they were left out; set, they are in "secret" entries encrypted with a
	// key derived from the operator's passphrase (secrets.go).
	Secrets *SecretsInfo `json:"secrets,omitempty"`
}

// Source is what an archive was exported from.
type Source struct {
	APIURL      string `json:"apiUrl"`
	WorkspaceID string `json:"workspaceId"`
	BotID       string `json:"botId,omitempty"`
}

// Entry is one record of the archive. Kind says what Data is (the kinds of
// docs/export-import.md); Bot the bot it belongs to; ID its id in the source.
type Entry struct {
	Seq    int64           `json:"seq"`
	Kind   string          `json:"kind"`
	Bot    string          `json:"bot,omitempty"`
	ID     string          `json:"id,omitempty"`
	SHA256 string          `json:"sha256"`
	Data   json.RawMessage `json:"data"`
}

// End is the last line: its presence says the archive is complete.
type End struct {
	End     bool  `json:"end"`
	Entries int64 `json:"entries"`
	// Report lists what the source API does not expose (so is not in the
	// archive) and what was left out on purpose.
	Report []string `json:"report"`
}

// Sum is the checksum of an entry's data.
func Sum(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// compact makes data one line (json.Compact) so each entry stays one line.
func compact(data []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Writer appends entries to an archive file. Entries are buffered: Commit
// makes everything written so far durable and answers the file's length
// and the last sequence number, which the journal records.
type Writer struct {
	f   *os.File
	w   *bufio.Writer
	off int64
	seq int64
}

// Create starts a new archive at path with its header.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	w := &Writer{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	h.Format, h.Version = Format, Version
	if err := w.line(h); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// Resume reopens an interrupted archive, cutting what follows off (the
// entries of a page whose commit did not complete) and continuing after
// entry seq.
func Resume(path string, off, seq int64) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(off); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		f.Close()
		return nil, err
	}
	return &Writer{f: f, w: bufio.NewWriterSize(f, 1<<20), off: off, seq: seq}, nil
}

func (w *Writer) line(v any) error {
	// No HTML escaping: an entry's data is written exactly as its checksum
	// was computed (json.Marshal would turn & into \u0026).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	n, err := w.w.Write(buf.Bytes())
	w.off += int64(n)
	return err
}

// Add appends one entry; data is any JSON value.
func (w *Writer) Add(kind, bot, id string, data json.RawMessage) error {
	d, err := compact(data)
	if err != nil {
		return fmt.Errorf("archive: entry %s %s: %w", kind, id, err)
	}
	w.seq++
	return w.line(Entry{Seq: w.seq, Kind: kind, Bot: bot, ID: id, SHA256: Sum(d), Data: d})
}

// Commit flushes and syncs the file and answers its length and the last
// entry's sequence number.
func (w *Writer) Commit() (off, seq int64, err error) {
	if err := w.w.Flush(); err != nil {
		return 0, 0, err
	}
	if err := w.f.Sync(); err != nil {
		return 0, 0, err
	}
	return w.off, w.seq, nil
}

// Seq is the last entry's sequence number.
func (w *Writer) Seq() int64 { return w.seq }

// Finish writes the end line and closes the file.
func (w *Writer) Finish(report []string) error {
	if report == nil {
		report = []string{}
	}
	if err := w.line(End{End: true, Entries: w.seq, Report: report}); err != nil {
		w.f.Close()
		return err
	}
	if _, _, err := w.Commit(); err != nil {
		w.f.Close()
		return err
	}
	return w.f.Close()
}

// Close closes the file without finishing it (an interrupted export).
func (w *Writer) Close() error {
	w.w.Flush()
	return w.f.Close()
}

// Reader reads an archive entry by entry, checking each entry's checksum
// and sequence.
type Reader struct {
	r      *bufio.Reader
	Header Header
	end    *End
	seq    int64
	// Offset is the number of bytes consumed so far.
	Offset int64
}

// ErrIncomplete: the archive has no end line (an export still running or
// interrupted).
var ErrIncomplete = errors.New("archive: incomplete (no end line): resume the export before importing it")

// NewReader reads the header.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{r: bufio.NewReaderSize(r, 1<<20)}
	line, err := rd.next()
	if err != nil {
		return nil, fmt.Errorf("archive: header: %w", err)
	}
	if err := json.Unmarshal(line, &rd.Header); err != nil {
		return nil, fmt.Errorf("archive: header: %w", err)
	}
	if rd.Header.Format != Format {
		return nil, fmt.Errorf("archive: not a %s file (format %q)", Format, rd.Header.Format)
	}
	if rd.Header.Version < 1 || rd.Header.Version > Version {
		return nil, fmt.Errorf("archive: version %d is not one this build reads (1 to %d)", rd.Header.Version, Version)
	}
	return rd, nil
}

func (rd *Reader) next() ([]byte, error) {
	line, err := rd.r.ReadBytes('\n')
	rd.Offset += int64(len(line))
	if err == io.EOF && len(line) > 0 {
		return nil, ErrIncomplete // a torn last line
	}
	if err != nil {
		return nil, err
	}
	return line, nil
}

// Next answers the next entry, or io.EOF after the end line. A wrong
// checksum, a gap in the sequence or a missing end line is an error.
func (rd *Reader) Next() (Entry, error) {
	if rd.end != nil {
		return Entry{}, io.EOF
	}
	line, err := rd.next()
	if err == io.EOF {
		return Entry{}, ErrIncomplete
	}
	if err != nil {
		return Entry{}, err
	}
	if bytes.HasPrefix(line, []byte(`{"end":`)) {
		var e End
		if err := json.Unmarshal(line, &e); err != nil {
			return Entry{}, fmt.Errorf("archive: end line: %w", err)
		}
		if e.Entries != rd.seq {
			return Entry{}, fmt.Errorf("archive: the end line counts %d entries, the archive holds %d", e.Entries, rd.seq)
		}
		rd.end = &e
		return Entry{}, io.EOF
	}
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("archive: entry after %d: %w", rd.seq, err)
	}
	if e.Seq != rd.seq+1 {
		return Entry{}, fmt.Errorf("archive: entry %d follows entry %d", e.Seq, rd.seq)
	}
	if Sum(e.Data) != e.SHA256 {
		return Entry{}, fmt.Errorf("archive: entry %d (%s %s): checksum mismatch", e.Seq, e.Kind, e.ID)
	}
	rd.seq = e.Seq
	return e, nil
}

// End is the end line, once Next has answered io.EOF.
func (rd *Reader) End() *End { return rd.end }
