package localdynamo

// The journal of the previous embedded DynamoDB (minidyn behind a journal of
// write requests). Open migrates a data directory that still has one: it
// replays the journal's requests into the store once, then removes it. Only
// the reading side is kept.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

const (
	journalName = "journal"
	// journalMagic starts every journal file; it doubles as a format version.
	journalMagic = "localdynamo journal v1\n"

	recordHeaderSize = 8 // payload length + CRC
	maxOpNameLen     = 64
	// maxPayload bounds a record's payload: the largest accepted request body
	// plus the flag, the op name and slack for bodies this package builds.
	maxPayload = maxBodyBytes + 1<<16
)

// ErrCorruptJournal is returned (wrapped) by Open when the journal is damaged
// somewhere other than at its end, so that it cannot have been caused by a
// crash during an unacknowledged write.
var ErrCorruptJournal = errors.New("localdynamo: corrupt journal")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordFlag tells replay what the original outcome of a request was.
type recordFlag byte

const (
	// flagApplied marks a request minidyn answered with 200; replaying it
	// must succeed again.
	flagApplied recordFlag = 0
	// flagFailed marks a failed request that may have changed minidyn's
	// state anyway; replay applies it and ignores the result.
	flagFailed recordFlag = 1
)

// record is one journaled request.
type record struct {
	flag recordFlag
	op   string
	body []byte
}

// decodePayload parses a record payload whose CRC has been checked.
func decodePayload(p []byte) (record, error) {
	if len(p) < 3 {
		return record{}, errors.New("payload too short")
	}
	flag := recordFlag(p[0])
	if flag != flagApplied && flag != flagFailed {
		return record{}, fmt.Errorf("unknown flag %d", flag)
	}
	n := int(p[1])
	if n == 0 || n > maxOpNameLen || 2+n > len(p) {
		return record{}, fmt.Errorf("bad op name length %d", n)
	}
	op := p[2 : 2+n]
	for _, c := range op {
		if (c < 'A' || c > 'Z') && (c < 'a' || c > 'z') {
			return record{}, fmt.Errorf("bad op name %q", op)
		}
	}
	return record{flag: flag, op: string(op), body: p[2+n:]}, nil
}

// parseRecordAt reports whether buf[at:] starts with a complete, valid record
// and returns its total length.
func parseRecordAt(buf []byte, at int) (int, bool) {
	if len(buf)-at < recordHeaderSize {
		return 0, false
	}
	n := int(binary.LittleEndian.Uint32(buf[at:]))
	if n < 3 || n > maxPayload || n > len(buf)-at-recordHeaderSize {
		return 0, false
	}
	payload := buf[at+recordHeaderSize : at+recordHeaderSize+n]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(buf[at+4:]) {
		return 0, false
	}
	if _, err := decodePayload(payload); err != nil {
		return 0, false
	}
	return recordHeaderSize + n, true
}

// scanResult describes a journal file after readJournal.
type scanResult struct {
	size     int64 // file size as found
	validEnd int64 // end of the last valid record; size > validEnd means a torn tail
	records  int   // valid records
}

// readJournal checks the header of the journal open in f and calls fn for
// each valid record in order. The body passed to fn is not reused. Damage at
// the end of the file (a record that is incomplete or fails its checks, with
// no valid record anywhere after it) ends the scan and is reported through
// scanResult.validEnd; damage followed by valid records is ErrCorruptJournal.
func readJournal(f *os.File, fn func(record) error) (scanResult, error) {
	st, err := f.Stat()
	if err != nil {
		return scanResult{}, err
	}
	res := scanResult{size: st.Size()}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return res, err
	}
	br := bufio.NewReaderSize(f, 1<<20)

	magic := make([]byte, len(journalMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != journalMagic {
		return res, fmt.Errorf("%w: %s does not start with the journal header", ErrCorruptJournal, f.Name())
	}
	off := int64(len(journalMagic))

	var hdr [recordHeaderSize]byte
	for {
		if off == res.size {
			res.validEnd = off
			return res, nil
		}
		ok := func() bool {
			if res.size-off < recordHeaderSize {
				return false
			}
			if _, err = io.ReadFull(br, hdr[:]); err != nil {
				return false
			}
			n := int64(binary.LittleEndian.Uint32(hdr[:4]))
			if n < 3 || n > maxPayload || n > res.size-off-recordHeaderSize {
				return false
			}
			payload := make([]byte, n)
			if _, err = io.ReadFull(br, payload); err != nil {
				return false
			}
			if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
				return false
			}
			rec, derr := decodePayload(payload)
			if derr != nil {
				return false
			}
			if err = fn(rec); err != nil {
				return false
			}
			off += recordHeaderSize + n
			res.records++
			return true
		}()
		if err != nil {
			// An I/O error or a replay failure, not damage.
			return res, err
		}
		if !ok {
			break
		}
	}

	// The record at off is damaged. It is a torn tail unless a valid record
	// follows it somewhere.
	tail := make([]byte, res.size-off)
	if _, err := f.ReadAt(tail, off); err != nil {
		return res, err
	}
	for at := 1; at+recordHeaderSize < len(tail); at++ {
		if _, ok := parseRecordAt(tail, at); ok {
			return res, fmt.Errorf("%w: %s: the record at offset %d is damaged but a valid record follows at offset %d, "+
				"so this is not a torn tail from a crash; to start anyway, keep a copy and truncate the file at offset %d, "+
				"losing every write after it",
				ErrCorruptJournal, f.Name(), off, off+int64(at), off)
		}
	}
	res.validEnd = off
	return res, nil
}
