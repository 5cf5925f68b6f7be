package platform

import (
	"context"
	"time"
)

// Backup is one backup of the local platform's data directory
// (shared/backup, docs/backup.md).
type Backup struct {
	Name    string    `json:"name"`
	Created time.Time `json:"createdAt"`
	// Size is the bytes of its files (hard links shared with the data
	// directory counted in full).
	Size    int64 `json:"size"`
	Objects int   `json:"objects"` // files' contents and deployed code held
	// Scheduled: taken by the schedule (retention prunes scheduled and
	// manual backups alike).
	Scheduled bool `json:"scheduled"`
}

// BackupStatus is the backups of a platform and what it will do with them.
type BackupStatus struct {
	Backups []Backup `json:"backups"`
	// Dir is where they are kept.
	Dir string `json:"dir"`
	// Every and Keep are the schedule (0: none) and retention (0: all).
	Every string `json:"every,omitempty"`
	Keep  int    `json:"keep"`
	// PendingRestore names the backup the platform will restore at its
	// next start ("" when none is staged).
	PendingRestore string `json:"pendingRestore,omitempty"`
}

// Backups takes, lists and stages the restore of backups of a running local
// platform (nil on AWS, where the table's point-in-time recovery and the
// bucket's versions are the backups).
type Backups interface {
	Status() (BackupStatus, error)
	// Take takes a backup now, while the platform serves.
	Take(ctx context.Context) (Backup, error)
	// StageRestore makes the next start restore the named backup (a
	// running platform's stores cannot be swapped under it).
	StageRestore(name string) error
	// CancelRestore forgets a staged restore.
	CancelRestore() error
	// Operator is the email of the account allowed to manage backups (the
	// owner of the machine: the local platform's first account).
	Operator() string
}
