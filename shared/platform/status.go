package platform

import "errors"

// errorStatus maps each error type to the reference's HTTP status.
var errorStatus = map[ErrorType]int{
	ErrInternal:            500,
	ErrUnauthorized:        401,
	ErrForbidden:           403,
	ErrPayloadTooLarge:     413,
	ErrInvalidPayload:      400,
	ErrUnsupportedMedia:    415,
	ErrMethodNotFound:      405,
	ErrResourceNotFound:    404,
	ErrInvalidJSONSchema:   400,
	ErrInvalidDataFormat:   400,
	ErrInvalidIdentifier:   400,
	ErrRelationConflict:    409,
	ErrReferenceConstrain:  409,
	ErrResourceLocked:      409,
	ErrReferenceNotFound:   400,
	ErrInvalidQuery:        400,
	ErrAlreadyExists:       409,
	ErrRateLimited:         429,
	ErrLimitExceeded:       413,
	ErrQuotaExceeded:       403,
	ErrInsufficientStorage: 507,
	ErrRuntime:             400,
	ErrBadGateway:          502,
	ErrOperationTimeout:    504,
}

// Status is the HTTP status of an error of type t (500 for an unknown type).
func (t ErrorType) Status() int {
	if s, ok := errorStatus[t]; ok {
		return s
	}
	return 500
}

// StatusOf is the HTTP status of err: its type's for a platform error,
// else 500.
func StatusOf(err error) int {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Type.Status()
	}
	return 500
}
