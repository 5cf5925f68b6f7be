package fsutil

import (
	"fmt"

	"github.com/cockroachdb/pebble/vfs"
)

// FreeBytes is the space available to this process on the disk holding dir.
func FreeBytes(dir string) (uint64, error) {
	u, err := vfs.Default.GetDiskUsage(dir)
	return u.AvailBytes, err
}

// ReserveMessage says why a write is refused on a disk below its reserve:
// the free space, the reserve, and how to change it (hint, e.g. a flag and
// a variable). The embedded DynamoDB and S3 say the same words, in their
// 507 answers and in a refused start.
func ReserveMessage(free uint64, reserve int64, hint string) string {
	msg := fmt.Sprintf("the disk holding the data has %s free, less than the %s it keeps in reserve: writes are refused until space is freed (reads still work)", mib(int64(free)), mib(reserve))
	if hint != "" {
		msg += "; " + hint
	}
	return msg
}

// mib writes n bytes in MiB (with a decimal below 10 MiB).
func mib(n int64) string {
	if n < 10<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
