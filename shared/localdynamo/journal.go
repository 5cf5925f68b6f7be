package localdynamo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/botforge/platform/shared/fsutil"
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

// appendTo appends the encoded record to dst.
func (r record) appendTo(dst []byte) []byte {
	n := 2 + len(r.op) + len(r.body)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	crcAt := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	start := len(dst)
	dst = append(dst, byte(r.flag), byte(len(r.op)))
	dst = append(dst, r.op...)
	dst = append(dst, r.body...)
	binary.LittleEndian.PutUint32(dst[crcAt:], crc32.Checksum(dst[start:], castagnoli))
	return dst
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

// createJournal atomically creates an empty journal (just the header) at path.
func createJournal(path string) error {
	return writeFileAtomic(path, func(w io.Writer) error {
		_, err := io.WriteString(w, journalMagic)
		return err
	})
}

// writeFileAtomic writes a file through fill into a temporary file next to
// path, fsyncs it, renames it over path and fsyncs the directory.
func writeFileAtomic(path string, fill func(io.Writer) error) error {
	tmp := path + ".tmp"
	if err := writeFileSynced(tmp, fill); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return fsutil.SyncDir(filepath.Dir(path))
}

// writeFileSynced creates (or truncates) path, writes it through fill and
// fsyncs it. On failure it removes the file.
func writeFileSynced(path string, fill func(io.Writer) error) (err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(path)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err = fill(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// journal is the append side of the journal file, with group commit.
//
// Invariant while no sync is in flight: buf holds exactly the bytes of the
// file range [synced, end). A waiter that finds a sync needed and none in
// flight becomes the leader: it takes buf, writes and fsyncs it outside the
// lock, then publishes the new synced offset and wakes everybody.
type journal struct {
	f *os.File

	mu      sync.Mutex
	cond    sync.Cond
	buf     []byte // appended records not yet handed to write(2)
	spare   []byte // recycled buffer
	end     int64  // file offset after the last appended record
	synced  int64  // file offset up to which the file is durable
	syncing bool   // a leader is writing and syncing
	err     error  // sticky: after a failed write or fsync nothing is durable any more
	records int64  // records in the file, including appended ones

	syncs atomic.Int64 // fsyncs performed, for metrics
}

func newJournal(f *os.File, end int64, records int) *journal {
	j := &journal{f: f, end: end, synced: end, records: int64(records)}
	j.cond.L = &j.mu
	return j
}

// append adds a record after all earlier ones and returns the offset a
// caller must wait for (with waitDurable) before acknowledging it. Callers
// serialize append with the state change it records.
func (j *journal) append(r record) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = r.appendTo(j.buf)
	j.end += int64(recordHeaderSize + 2 + len(r.op) + len(r.body))
	j.records++
	return j.end
}

// appended returns the offset just past the last appended record.
func (j *journal) appended() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.end
}

// stats returns the number of records in the file and of fsyncs done.
func (j *journal) stats() (records, syncs int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.records, j.syncs.Load()
}

// failure returns the sticky write error, if any.
func (j *journal) failure() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// waitDurable blocks until the file is durable up to off, syncing it itself
// if no other goroutine is doing so.
func (j *journal) waitDurable(off int64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.synced < off {
		if j.err != nil {
			return j.err
		}
		if j.syncing {
			j.cond.Wait()
			continue
		}
		j.syncing = true
		data, target := j.buf, j.end
		j.buf = j.spare[:0]
		j.spare = nil
		j.mu.Unlock()

		err := j.writeAndSync(data)

		j.mu.Lock()
		if cap(data) <= 4<<20 {
			j.spare = data[:0]
		}
		j.syncing = false
		if err != nil {
			j.err = fmt.Errorf("localdynamo: journal write failed, refusing further requests: %w", err)
		} else {
			j.synced = target
		}
		j.cond.Broadcast()
	}
	return nil
}

func (j *journal) writeAndSync(data []byte) error {
	if len(data) > 0 {
		if _, err := j.f.Write(data); err != nil {
			return err
		}
	}
	j.syncs.Add(1)
	return j.f.Sync()
}

// close waits for an in-flight sync and closes the file. The caller must
// have stopped appends and waited for durability first.
func (j *journal) close() error {
	j.mu.Lock()
	for j.syncing {
		j.cond.Wait()
	}
	err := j.err
	if err == nil && j.synced < j.end {
		err = errors.New("localdynamo: journal closed with unsynced records")
	}
	j.mu.Unlock()
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}
