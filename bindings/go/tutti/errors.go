package tutti

// #include <tutti/tutti.h>
import "C"

import (
	"fmt"
	"runtime"
)

// Status is a status of tutti.h: 0 is OK, errors are negative, and values never change. Each
// error status is also an error value (ErrNotAMember, ...), so that errors.Is(err, ErrTimeout)
// tells what failed whatever the message.
type Status int32

// The statuses of tutti.h.
const (
	OK                   Status = C.TUTTI_OK
	ErrInvalidArgument   Status = C.TUTTI_ERR_INVALID_ARGUMENT
	ErrUnknownSet        Status = C.TUTTI_ERR_UNKNOWN_SET
	ErrNotAMember        Status = C.TUTTI_ERR_NOT_A_MEMBER
	ErrDuplicateName     Status = C.TUTTI_ERR_DUPLICATE_NAME
	ErrMismatch          Status = C.TUTTI_ERR_MISMATCH
	ErrPeerLost          Status = C.TUTTI_ERR_PEER_LOST
	ErrCoordinatorLost   Status = C.TUTTI_ERR_COORDINATOR_LOST
	ErrTimeout           Status = C.TUTTI_ERR_TIMEOUT
	ErrAborted           Status = C.TUTTI_ERR_ABORTED
	ErrStalled           Status = C.TUTTI_ERR_STALLED
	ErrVersionMismatch   Status = C.TUTTI_ERR_VERSION_MISMATCH
	ErrAuthFailed        Status = C.TUTTI_ERR_AUTH_FAILED
	ErrShutDown          Status = C.TUTTI_ERR_SHUT_DOWN
	ErrInternal          Status = C.TUTTI_ERR_INTERNAL
	ErrSetRemoved        Status = C.TUTTI_ERR_SET_REMOVED
	ErrUnsupported       Status = C.TUTTI_ERR_UNSUPPORTED
	ErrEvicted           Status = C.TUTTI_ERR_EVICTED
	ErrLimitExceeded     Status = C.TUTTI_ERR_LIMIT_EXCEEDED
	ErrDeviceUnavailable Status = C.TUTTI_ERR_DEVICE_UNAVAILABLE
	ErrReformed          Status = C.TUTTI_ERR_REFORMED
	statusInProgress     Status = C.TUTTI_IN_PROGRESS
)

var statusNames = map[Status]string{
	OK: "TUTTI_OK", ErrInvalidArgument: "TUTTI_ERR_INVALID_ARGUMENT",
	ErrUnknownSet: "TUTTI_ERR_UNKNOWN_SET", ErrNotAMember: "TUTTI_ERR_NOT_A_MEMBER",
	ErrDuplicateName: "TUTTI_ERR_DUPLICATE_NAME", ErrMismatch: "TUTTI_ERR_MISMATCH",
	ErrPeerLost: "TUTTI_ERR_PEER_LOST", ErrCoordinatorLost: "TUTTI_ERR_COORDINATOR_LOST",
	ErrTimeout: "TUTTI_ERR_TIMEOUT", ErrAborted: "TUTTI_ERR_ABORTED",
	ErrStalled: "TUTTI_ERR_STALLED", ErrVersionMismatch: "TUTTI_ERR_VERSION_MISMATCH",
	ErrAuthFailed: "TUTTI_ERR_AUTH_FAILED", ErrShutDown: "TUTTI_ERR_SHUT_DOWN",
	ErrInternal: "TUTTI_ERR_INTERNAL", ErrSetRemoved: "TUTTI_ERR_SET_REMOVED",
	ErrUnsupported: "TUTTI_ERR_UNSUPPORTED", ErrEvicted: "TUTTI_ERR_EVICTED",
	ErrLimitExceeded: "TUTTI_ERR_LIMIT_EXCEEDED", ErrDeviceUnavailable: "TUTTI_ERR_DEVICE_UNAVAILABLE",
	ErrReformed: "TUTTI_ERR_REFORMED", statusInProgress: "TUTTI_IN_PROGRESS",
}

// String is the C name of the status, e.g. "TUTTI_ERR_NOT_A_MEMBER".
func (s Status) String() string {
	if name, ok := statusNames[s]; ok {
		return name
	}
	return fmt.Sprintf("TUTTI_ERR_UNKNOWN(%d)", int32(s))
}

// Explanation is the library's sentence on what the status means (tutti_status_string).
func (s Status) Explanation() string {
	return C.GoString(C.tutti_status_string(C.tutti_status_t(s)))
}

// Error makes a status usable as a sentinel: "NAME: explanation".
func (s Status) Error() string {
	return s.String() + ": " + s.Explanation()
}

// Error is a failed tutti call: its status and the library's detail (tutti_last_error). It
// matches its status with errors.Is (errors.Is(err, tutti.ErrNotAMember)); errors.As gives
// the *Error. A wait ended by its context also unwraps to the context's error.
type Error struct {
	Status  Status
	Message string
	cause   error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Status.Error()
	}
	return e.Status.String() + ": " + e.Message
}

// Is reports whether target is this error's status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Unwrap gives the context's error when a context ended the wait, else nil.
func (e *Error) Unwrap() error {
	return e.cause
}

// call runs one C call and, on failure, reads its message. tutti_last_error is thread-local
// and Go moves goroutines between threads between cgo calls, so both run on one locked thread.
func call(f func() C.tutti_status_t) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if s := Status(f()); s != OK {
		return &Error{Status: s, Message: C.GoString(C.tutti_last_error())}
	}
	return nil
}

// invalid is an error found by the binding before any C call, worded as the library would.
func invalid(format string, args ...any) error {
	return &Error{Status: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}
