package fsutil

import (
	"io"
	"os"
)

// LinkOrCopy makes dst a hard link to src, or a copy of it (fsynced) when
// they are on different file systems. Only for files never changed in place
// once written (Pebble's SSTables, the embedded S3's data files): a link
// shares the bytes.
func LinkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return CopyFile(src, dst, -1)
}

// CopyFile copies src's first n bytes (all of it when n < 0) into a new
// file dst (mode 0600) and fsyncs it.
func CopyFile(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	var r io.Reader = in
	if n >= 0 {
		r = io.LimitReader(in, n)
	}
	_, err = io.Copy(out, r)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
