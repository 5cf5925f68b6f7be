package archive

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"

	"github.com/botforge/platform/shared/fsutil"
)

// Journal is an interrupted export's or import's progress, rewritten
// (atomically: a new file renamed over the old) after each page of entries
// made durable. An export's journal names the archive length and last
// entry after the page, how many units of work were done before the
// current one, that unit's name and the source's cursor in it; an
// import's, the last entry applied.
type Journal struct {
	Offset int64  `json:"offset"`
	Seq    int64  `json:"seq"`
	Units  int    `json:"units"`
	Unit   string `json:"unit,omitempty"`
	Cursor string `json:"cursor,omitempty"`
	// Header is the archive's header, so a resumed export keeps its
	// secrets' salt.
	Header *Header `json:"header,omitempty"`
}

// LoadJournal reads path's journal; none is (nil, nil).
func LoadJournal(path string) (*Journal, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var j Journal
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, err
	}
	return &j, nil
}

// Save writes the journal to path atomically and durably.
func (j *Journal) Save(path string) error {
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, b)
}
