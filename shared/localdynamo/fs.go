package localdynamo

import (
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// privateFS is the operating system's file system as Pebble sees it, with
// every file it creates readable by its owner only (0600, directories 0700):
// the store holds signing secrets and all chat content.
type privateFS struct{ vfs.FS }

func newPrivateFS() privateFS { return privateFS{vfs.Default} }

func (f privateFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

func (f privateFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(newname, 0o600); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

func (f privateFS) MkdirAll(dir string, _ os.FileMode) error { return f.FS.MkdirAll(dir, 0o700) }
