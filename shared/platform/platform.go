// Package platform holds the domain of the bot platform API: the error types
// every layer speaks, workspace roles, and the identifier and time formats of
// the wire. It imports nothing of AWS or HTTP, so every other package can
// depend on it.
package platform

import (
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// ErrorType is one of the error types of the reference API. The HTTP layer
// maps each to its status code in one place (ErrorType.Status, status.go).
type ErrorType string

const (
	ErrInternal           ErrorType = "Internal"
	ErrUnauthorized       ErrorType = "Unauthorized"
	ErrForbidden          ErrorType = "Forbidden"
	ErrPayloadTooLarge    ErrorType = "PayloadTooLarge"
	ErrInvalidPayload     ErrorType = "InvalidPayload"
	ErrUnsupportedMedia   ErrorType = "UnsupportedMediaType"
	ErrMethodNotFound     ErrorType = "MethodNotFound"
	ErrResourceNotFound   ErrorType = "ResourceNotFound"
	ErrInvalidJSONSchema  ErrorType = "InvalidJsonSchema"
	ErrInvalidDataFormat  ErrorType = "InvalidDataFormat"
	ErrInvalidIdentifier  ErrorType = "InvalidIdentifier"
	ErrRelationConflict   ErrorType = "RelationConflict"
	ErrReferenceConstrain ErrorType = "ReferenceConstraint"
	ErrResourceLocked     ErrorType = "ResourceLockedConflict"
	ErrReferenceNotFound  ErrorType = "ReferenceNotFound"
	ErrInvalidQuery       ErrorType = "InvalidQuery"
	ErrAlreadyExists      ErrorType = "AlreadyExists"
	ErrRateLimited        ErrorType = "RateLimited"
	ErrLimitExceeded      ErrorType = "LimitExceeded"
	// ErrQuotaExceeded: an operator's usage quota is reached (403).
	ErrQuotaExceeded ErrorType = "QuotaExceeded"
	// ErrInsufficientStorage: the local platform's disk is full (507).
	ErrInsufficientStorage ErrorType = "InsufficientStorage"
	// ErrRuntime: a bot or integration refused a call made for the caller
	// (answered 4xx: callAction with input its handler rejects).
	ErrRuntime ErrorType = "Runtime"
	// ErrBadGateway: a bot or integration could not be reached, failed
	// (answered 5xx) or answered something unusable (502).
	ErrBadGateway ErrorType = "BadGateway"
	// ErrOperationTimeout: a bot or integration took the call and did not
	// answer in time (504).
	ErrOperationTimeout ErrorType = "OperationTimeout"
)

// Error is an error the caller can act on: its Type picks the HTTP status and
// its Message is shown to the caller as is. Any other error is internal and
// its text never reaches the caller.
type Error struct {
	Type    ErrorType
	Message string
}

func (e *Error) Error() string { return string(e.Type) + ": " + e.Message }

// Errorf returns an *Error of type t.
func Errorf(t ErrorType, format string, args ...any) error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...)}
}

// NotFound is the answer for a missing resource and for one the caller may not
// see: both look the same, so ids cannot be probed across tenants.
func NotFound(kind, id string) error {
	return Errorf(ErrResourceNotFound, "%s %q not found", kind, id)
}

// Invalid reports bad input.
func Invalid(format string, args ...any) error { return Errorf(ErrInvalidPayload, format, args...) }

// Forbidden reports an authenticated caller lacking the right.
func Forbidden(format string, args ...any) error { return Errorf(ErrForbidden, format, args...) }

// TypeOf returns the type of err when it is (or wraps) an *Error, else ErrInternal.
func TypeOf(err error) ErrorType {
	var e *Error
	if errors.As(err, &e) {
		return e.Type
	}
	return ErrInternal
}

// Role is a workspace role, ordered: each role can do what the ones before it can.
type Role string

const (
	RoleViewer        Role = "viewer"
	RoleBilling       Role = "billing"
	RoleDeveloper     Role = "developer"
	RoleManager       Role = "manager"
	RoleAdministrator Role = "administrator"
	RoleOwner         Role = "owner"
)

var roleRank = map[Role]int{RoleViewer: 1, RoleBilling: 2, RoleDeveloper: 3, RoleManager: 4, RoleAdministrator: 5, RoleOwner: 6}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return roleRank[r] > 0 }

// AtLeast reports whether r grants everything min grants.
func (r Role) AtLeast(min Role) bool { return roleRank[r] >= roleRank[min] && roleRank[min] > 0 }

// TimeFormat is the wire format of every timestamp: ISO 8601, UTC, milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime renders t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Clock returns the current time; tests replace it.
var Clock = func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// Now is the current time in the wire format.
func Now() string { return FormatTime(Clock()) }

// Id prefixes. Ids are prefix + ULID (26 chars), which keeps them within the
// reference's 28..36 characters and sortable by creation time. Accounts use a
// UUID because the reference types a member's userId as one.
const (
	PrefixWorkspace = "wkspace_"
	PrefixBot       = "bot_"
	PrefixMember    = "wkspmbr_"
	PrefixPAT       = "pat_"
	PrefixBAK       = "bak_"
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns a new id with the given prefix. Ids made by one process are
// strictly increasing, even within a millisecond, so lists ordered by
// creation time and id keep creation order.
func NewID(prefix string) string {
	idMu.Lock()
	defer idMu.Unlock()
	return prefix + ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy).String()
}

// NewUnguessableID returns an id whose 80 random bits all come fresh from
// crypto/rand: unlike NewID's, never the increment of an id made in the
// same millisecond. For ids that are secrets (webhook ids).
func NewUnguessableID(prefix string) string {
	return prefix + ulid.MustNew(ulid.Timestamp(time.Now()), rand.Reader).String()
}

// NewAccountID returns a new account id (a UUID).
func NewAccountID() string { return uuid.NewString() }

// HasPrefix reports whether id is shaped like an id of the given prefix; used
// to answer 404 early without a database read.
func HasPrefix(id, prefix string) bool {
	return strings.HasPrefix(id, prefix) && len(id) == len(prefix)+26
}

// NewErrorID returns an error id in the format the official client generates:
// err_<UTC yyyymmddhhmmss>x<8 hex digits>.
func NewErrorID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("err_%sx%X", time.Now().UTC().Format("20060102150405"), b)
}

// NewSecret returns a random secret (256 bits, hex), e.g. a signing secret.
func NewSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b)
}
