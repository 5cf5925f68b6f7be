package localdynamo

import (
	"os"

	"github.com/cockroachdb/pebble/vfs"
)

// privateFS is the operating system's file system as Pebble sees it, with
// every file it creates readable by its owner only (0600, directories 0700):
// the store holds signing secrets and all chat content.
type privateFS struct {
	vfs.FS
	beforeSync func(name string) // tests: runs before each fsync of a file written
}

func (f privateFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(name, 0o600); err != nil {
		_ = file.Close()
		return nil, err
	}
	return f.hooked(name, file), nil
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
	return f.hooked(newname, file), nil
}

func (f privateFS) hooked(name string, file vfs.File) vfs.File {
	if f.beforeSync == nil {
		return file
	}
	return hookedFile{File: file, name: name, before: f.beforeSync}
}

// hookedFile runs a test's hook before each fsync.
type hookedFile struct {
	vfs.File
	name   string
	before func(string)
}

func (h hookedFile) Sync() error { h.before(h.name); return h.File.Sync() }

func (h hookedFile) SyncData() error { h.before(h.name); return h.File.SyncData() }

func (h hookedFile) SyncTo(length int64) (bool, error) {
	h.before(h.name)
	return h.File.SyncTo(length)
}

func (f privateFS) MkdirAll(dir string, _ os.FileMode) error { return f.FS.MkdirAll(dir, 0o700) }
