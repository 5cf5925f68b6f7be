// Package backup backs up and restores the local platform's data directory
// (docs/backup.md): a consistent snapshot of the embedded DynamoDB and S3
// taken while the platform serves, the rest of the directory copied beside
// them, on a schedule with retention, and restored with one command.
//
// A backup is a directory <backup-dir>/backup-<UTC time>/ laid out as the
// data directory (dynamodb/, s3/, logs/, secrets.json...) with a manifest,
// backup.json, written last: a directory without it (a backup interrupted)
// is not a backup and is removed by the next one.
//
// Consistency: the embedded S3's writes wait (locals3.Server.Snapshot)
// while the DynamoDB store is checkpointed (localdynamo.Server.Checkpoint)
// and the S3 records are copied, so both are copied as of one instant:
// every write answered before the backup started is in it, and every file
// record of the checkpoint has its contents. Pebble's checkpoint holds whole
// batches only, so the copy opens as a store that stopped cleanly does.
// Logs are copied as they are, each file up to its last complete line.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/botforge/platform/shared/fsutil"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/locals3"
	"github.com/botforge/platform/shared/platform"
)

// Version is the layout version written in each manifest.
const Version = 1

const (
	manifestName = "backup.json"
	dynamoDir    = "dynamodb"
	s3Dir        = "s3"
	workersDir   = "workers" // deployed code's scratch files, rebuilt at start
	prefix       = "backup-"
	partialExt   = ".partial"
	// PendingFile in the data directory names the backup the next start
	// restores (a restore staged while the platform ran).
	PendingFile = "restore-pending"
	// timeFormat names backups so that name order is time order.
	timeFormat = "20060102T150405.000Z"
)

var nameRE = regexp.MustCompile(`^backup-[0-9]{8}T[0-9]{6}\.[0-9]{3}Z$`)

// ErrRunning: the data directory is in use by a running platform.
var ErrRunning = errors.New("a platform is running on this data directory")

// Manifest is backup.json.
type Manifest struct {
	Version   int       `json:"version"`
	Created   time.Time `json:"createdAt"`
	Scheduled bool      `json:"scheduled,omitempty"`
	Size      int64     `json:"size"`
	Files     int       `json:"files"`
	Buckets   int       `json:"buckets"`
	Objects   int       `json:"objects"`
	// PauseMillis is how long the platform's S3 writes waited, in ms: the
	// checkpoint, the S3 records read and their data files linked.
	PauseMillis int64 `json:"pauseMillis"`
}

// Stores are a running platform's embedded stores.
type Stores struct {
	Dynamo *localdynamo.Server
	S3     *locals3.Server
}

// Take writes a backup of dataDir, whose stores are open in st (a running
// platform), into backupDir, and returns it. It may run while the platform
// serves.
func Take(st Stores, dataDir, backupDir string, scheduled bool) (platform.Backup, error) {
	if st.Dynamo == nil || st.S3 == nil {
		return platform.Backup{}, errors.New("backups cover the embedded DynamoDB and S3; this platform uses external ones (DYNAMODB_ENDPOINT, S3_ENDPOINT): back those up with their own tools")
	}
	if err := checkDirs(dataDir, backupDir); err != nil {
		return platform.Backup{}, err
	}
	if err := os.MkdirAll(backupDir, 0o700); err != nil {
		return platform.Backup{}, err
	}
	removePartials(backupDir)
	now := time.Now().UTC()
	name := prefix + now.Format(timeFormat)
	for {
		if _, err := os.Stat(filepath.Join(backupDir, name)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		now = now.Add(time.Millisecond)
		name = prefix + now.Format(timeFormat)
	}
	tmp := filepath.Join(backupDir, name+partialExt)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return platform.Backup{}, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.RemoveAll(tmp)
		}
	}()
	m := Manifest{Version: Version, Created: now, Scheduled: scheduled}
	s3stats, err := st.S3.Snapshot(filepath.Join(tmp, s3Dir), func() error {
		return st.Dynamo.Checkpoint(filepath.Join(tmp, dynamoDir))
	})
	m.PauseMillis = s3stats.Paused.Milliseconds()
	if err != nil {
		return platform.Backup{}, err
	}
	m.Buckets, m.Objects = s3stats.Buckets, s3stats.Objects
	if err := copyRest(dataDir, tmp, backupDir); err != nil {
		return platform.Backup{}, err
	}
	if err := finish(tmp, &m); err != nil {
		return platform.Backup{}, err
	}
	if err := os.Rename(tmp, filepath.Join(backupDir, name)); err != nil {
		return platform.Backup{}, err
	}
	if err := fsutil.SyncDir(backupDir); err != nil {
		return platform.Backup{}, err
	}
	ok = true
	return info(name, m), nil
}

// TakeStopped backs up a data directory no platform runs on (it opens the
// stores, holding their locks, for the time of the backup). A running
// platform's directory is refused with ErrRunning: ask the platform
// (POST /v1/admin/backups, `local backup --api-url`).
func TakeStopped(dataDir, backupDir string) (platform.Backup, error) {
	if _, err := os.Stat(filepath.Join(dataDir, dynamoDir)); err != nil {
		return platform.Backup{}, fmt.Errorf("%s holds no platform data (no %s/): %w", dataDir, dynamoDir, err)
	}
	d, err := localdynamo.OpenWith(filepath.Join(dataDir, dynamoDir), localdynamo.Options{MinFreeBytes: -1})
	if err != nil {
		if errors.Is(err, localdynamo.ErrLocked) {
			return platform.Backup{}, fmt.Errorf("%s: %w", dataDir, ErrRunning)
		}
		return platform.Backup{}, err
	}
	defer d.Close()
	// The snapshot reads the records only: credentials are not checked.
	s3, err := locals3.Open(locals3.Options{Dir: filepath.Join(dataDir, s3Dir), Region: "us-east-1", AccessKeyID: "backup", SecretAccessKey: "backup", MinFreeBytes: -1})
	if err != nil {
		return platform.Backup{}, err
	}
	defer s3.Close()
	return Take(Stores{Dynamo: d, S3: s3}, dataDir, backupDir, false)
}

// checkDirs refuses a backup directory inside the data directory or the
// other way round (a backup would copy itself, a restore move it away).
func checkDirs(dataDir, backupDir string) error {
	a, err1 := filepath.Abs(dataDir)
	b, err2 := filepath.Abs(backupDir)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if a == b || strings.HasPrefix(b, a+string(filepath.Separator)) || strings.HasPrefix(a, b+string(filepath.Separator)) {
		return fmt.Errorf("the backup directory %s and the data directory %s must not contain each other", backupDir, dataDir)
	}
	return nil
}

// copyRest copies the data directory's other entries (secrets, schedules,
// logs, tokens...) into dst: all but the stores, the workers' scratch files,
// hidden entries (earlier restores' leftovers) and the backup directory.
func copyRest(dataDir, dst, backupDir string) error {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return err
	}
	bAbs, _ := filepath.Abs(backupDir)
	for _, e := range entries {
		n := e.Name()
		if n == dynamoDir || n == s3Dir || n == workersDir || n == PendingFile || strings.HasPrefix(n, ".") {
			continue
		}
		src := filepath.Join(dataDir, n)
		if a, _ := filepath.Abs(src); a == bAbs {
			continue
		}
		err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // removed meanwhile (an old log file)
				}
				return err
			}
			rel, _ := filepath.Rel(dataDir, p)
			out := filepath.Join(dst, rel)
			if d.IsDir() {
				return os.MkdirAll(out, 0o700)
			}
			if !d.Type().IsRegular() {
				return nil
			}
			n := int64(-1)
			if strings.HasSuffix(p, ".log") {
				n = completeLines(p) // a line being appended is left out
			}
			if err := fsutil.CopyFile(p, out, n); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// completeLines is the length of path up to its last newline.
func completeLines(path string) int64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return int64(strings.LastIndexByte(string(raw), '\n') + 1)
}

// finish counts the backup's files and writes its manifest (fsynced).
func finish(dir string, m *Manifest) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		m.Files++
		m.Size += fi.Size()
		return nil
	})
	if err != nil {
		return err
	}
	raw, _ := json.MarshalIndent(m, "", "  ")
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, manifestName), raw); err != nil {
		return err
	}
	return fsutil.SyncDir(dir)
}

func info(name string, m Manifest) platform.Backup {
	return platform.Backup{Name: name, Created: m.Created, Size: m.Size, Objects: m.Objects, Scheduled: m.Scheduled}
}

// removePartials removes backups interrupted before their manifest.
func removePartials(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), partialExt) {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// List returns the backups in dir, newest first (a missing dir has none).
func List(dir string) ([]platform.Backup, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []platform.Backup{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []platform.Backup{}
	for _, e := range entries {
		if !e.IsDir() || !nameRE.MatchString(e.Name()) {
			continue
		}
		m, err := readManifest(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // not (yet) a backup
		}
		out = append(out, info(e.Name(), m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name > out[j].Name })
	return out, nil
}

func readManifest(dir string) (Manifest, error) {
	var m Manifest
	raw, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		return m, fmt.Errorf("%s is not a backup (no %s): %w", dir, manifestName, err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(dir, manifestName), err)
	}
	if m.Version != Version {
		return m, fmt.Errorf("%s: layout version %d, this binary reads %d", dir, m.Version, Version)
	}
	return m, nil
}

// Prune removes the oldest backups in dir beyond the newest keep (keep <= 0
// keeps all) and returns their names.
func Prune(dir string, keep int) ([]string, error) {
	if keep <= 0 {
		return nil, nil
	}
	all, err := List(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, b := range all[min(keep, len(all)):] {
		if err := os.RemoveAll(filepath.Join(dir, b.Name)); err != nil {
			return removed, err
		}
		removed = append(removed, b.Name)
	}
	return removed, nil
}

// Resolve turns what the operator named (a backup's name in backupDir, or a
// path to a backup directory) into the backup's path.
func Resolve(backupDir, name string) (string, error) {
	p := name
	if nameRE.MatchString(name) {
		if _, err := os.Stat(filepath.Join(backupDir, name)); err == nil {
			p = filepath.Join(backupDir, name)
		}
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no backup %s in %s, and no such directory (local backup --list lists the backups)", name, backupDir)
	}
	if _, err := readManifest(p); err != nil {
		return "", err
	}
	return p, nil
}

// Running tells whether a platform holds dataDir's stores.
func Running(dataDir string) bool {
	for _, lock := range []string{filepath.Join(dataDir, dynamoDir, "LOCK"), filepath.Join(dataDir, s3Dir, "lock")} {
		if _, err := os.Stat(lock); err != nil {
			continue
		}
		f, err := fsutil.LockDir(lock, 0)
		if err != nil {
			return true
		}
		_ = fsutil.UnlockDir(f)
	}
	return false
}

// Restore replaces dataDir's state with the backup at path. It refuses a
// directory a platform is running on (ErrRunning). What the directory held
// is moved, not deleted, into <dataDir>/.before-restore-<time> (returned;
// "" when it held nothing).
func Restore(path, dataDir string) (string, error) {
	if _, err := readManifest(path); err != nil {
		return "", err
	}
	if err := checkDirs(dataDir, filepath.Dir(path)); err != nil {
		return "", err
	}
	if Running(dataDir) {
		return "", fmt.Errorf("%s: %w; stop it first, or stage the restore from the console (it happens at the next start)", dataDir, ErrRunning)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", err
	}
	stamp := time.Now().UTC().Format(timeFormat)
	// The copy first, beside the state it replaces (the same file system,
	// so the swap is renames): an interrupted copy changes nothing.
	stage := filepath.Join(dataDir, ".restoring-"+stamp)
	if err := copyTree(path, stage); err != nil {
		_ = os.RemoveAll(stage)
		return "", err
	}
	_ = os.Remove(filepath.Join(stage, manifestName))
	aside := filepath.Join(dataDir, ".before-restore-"+stamp)
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return "", err
	}
	moved := 0
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || n == PendingFile {
			continue
		}
		if err := os.MkdirAll(aside, 0o700); err != nil {
			return "", err
		}
		if err := os.Rename(filepath.Join(dataDir, n), filepath.Join(aside, n)); err != nil {
			return "", err
		}
		moved++
	}
	staged, err := os.ReadDir(stage)
	if err != nil {
		return "", err
	}
	for _, e := range staged {
		if err := os.Rename(filepath.Join(stage, e.Name()), filepath.Join(dataDir, e.Name())); err != nil {
			return "", err
		}
	}
	if err := os.Remove(stage); err != nil {
		return "", err
	}
	if err := fsutil.SyncDir(dataDir); err != nil {
		return "", err
	}
	if moved == 0 {
		return "", nil
	}
	return aside, nil
}

// copyTree copies the backup at src into dst: SSTables and S3 data files
// (never changed once written) hard-linked when possible, everything else
// copied, since Pebble appends to its MANIFEST and reuses WAL files: a link
// would let the restored store write into the backup.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		if strings.HasSuffix(p, ".sst") || strings.HasSuffix(p, ".data") {
			return fsutil.LinkOrCopy(p, out)
		}
		return fsutil.CopyFile(p, out, -1)
	})
}

// Stage makes the next start of the platform on dataDir restore the backup
// at path (ApplyPending).
func Stage(path, dataDir string) error {
	if _, err := readManifest(path); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dataDir, PendingFile), []byte(abs+"\n"))
}

// Pending returns the path of the backup staged for the next start ("" when
// none).
func Pending(dataDir string) string {
	raw, err := os.ReadFile(filepath.Join(dataDir, PendingFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}

// Cancel forgets a staged restore.
func Cancel(dataDir string) error {
	err := os.Remove(filepath.Join(dataDir, PendingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ApplyPending restores the staged backup, if any, before the platform
// opens its stores; it returns the backup restored ("" when none was
// staged) and where the replaced state went. The stage is removed only
// once the restore is done: a crash during it restores again at the next
// start (Restore's copy is made beside the state, so a second run starts
// over cleanly).
func ApplyPending(dataDir string) (restored, aside string, err error) {
	p := Pending(dataDir)
	if p == "" {
		return "", "", nil
	}
	aside, err = Restore(p, dataDir)
	if err != nil {
		return p, "", fmt.Errorf("restoring the staged backup %s: %w (remove %s to start without it)", p, err, filepath.Join(dataDir, PendingFile))
	}
	return p, aside, Cancel(dataDir)
}

// Manager is a running platform's backups: taken on demand and on a
// schedule, pruned to Keep, restores staged for the next start. It
// implements platform.Backups.
type Manager struct {
	Stores  Stores
	DataDir string
	Dir     string
	Every   time.Duration // 0: no schedule
	Keep    int           // 0: keep all
	// OperatorEmail may manage the backups through the API.
	OperatorEmail string
	// OnError receives a scheduled backup's failure.
	OnError func(error)
	mu      sync.Mutex // one backup at a time
}

var _ platform.Backups = (*Manager)(nil)

// Status implements platform.Backups.
func (m *Manager) Status() (platform.BackupStatus, error) {
	all, err := List(m.Dir)
	if err != nil {
		return platform.BackupStatus{}, err
	}
	st := platform.BackupStatus{Backups: all, Dir: m.Dir, Keep: m.Keep}
	if m.Every > 0 {
		st.Every = m.Every.String()
	}
	if p := Pending(m.DataDir); p != "" {
		st.PendingRestore = filepath.Base(p)
	}
	return st, nil
}

// Take implements platform.Backups.
func (m *Manager) Take(ctx context.Context) (platform.Backup, error) {
	return m.take(false)
}

func (m *Manager) take(scheduled bool) (platform.Backup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, err := Take(m.Stores, m.DataDir, m.Dir, scheduled)
	if err != nil {
		return b, err
	}
	_, err = Prune(m.Dir, m.Keep)
	return b, err
}

// StageRestore implements platform.Backups.
func (m *Manager) StageRestore(name string) error {
	if !nameRE.MatchString(name) {
		return platform.Invalid("%q is not a backup name (backup-<yyyymmdd>T<hhmmss.mmm>Z)", name)
	}
	p := filepath.Join(m.Dir, name)
	if _, err := readManifest(p); err != nil {
		return platform.NotFound("backup", name)
	}
	return Stage(p, m.DataDir)
}

// CancelRestore implements platform.Backups.
func (m *Manager) CancelRestore() error { return Cancel(m.DataDir) }

// Operator implements platform.Backups.
func (m *Manager) Operator() string { return m.OperatorEmail }

// Run takes a backup every m.Every until ctx is done (nothing when Every
// is 0).
func (m *Manager) Run(ctx context.Context) {
	if m.Every <= 0 {
		return
	}
	t := time.NewTicker(m.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := m.take(true); err != nil && m.OnError != nil {
				m.OnError(err)
			}
		}
	}
}

// The variables standing for serve's backup flags.
const (
	EnvDir   = "PLATFORM_BACKUP_DIR"
	EnvEvery = "PLATFORM_BACKUP_EVERY"
	EnvKeep  = "PLATFORM_BACKUP_KEEP"
)

// DefaultKeep is how many backups are kept unless told otherwise.
const DefaultKeep = 7

// ParseSchedule reads the schedule and retention given as flags (empty and
// negative: unset) or else by EnvEvery and EnvKeep.
func ParseSchedule(every string, keep int, getenv func(string) string) (time.Duration, int, error) {
	if every == "" {
		every = getenv(EnvEvery)
	}
	var d time.Duration
	if every != "" && every != "0" {
		var err error
		if d, err = time.ParseDuration(every); err != nil || d < time.Second {
			return 0, 0, fmt.Errorf("backup interval %q: want a duration of 1s or more, e.g. 6h or 30m (0: none)", every)
		}
	}
	if keep < 0 {
		if v := getenv(EnvKeep); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return 0, 0, fmt.Errorf("%s=%q: want a whole number, 0 or more (0 keeps all)", EnvKeep, v)
			}
			keep = n
		} else {
			keep = DefaultKeep
		}
	}
	return d, keep, nil
}
