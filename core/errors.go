package core

import (
	"errors"
	"fmt"
)

// Code classifies a core error. Each protocol front keeps one table from
// Code to its own vocabulary (AMQP condition, HTTP status).
type Code uint8

// The error codes both fronts must be able to report.
const (
	CodeInternal          Code = iota // a bug or a storage failure
	CodeNotFound                      // the entity does not exist
	CodeLockLost                      // the message lock is unknown, expired or settled
	CodeSessionLockLost               // the session lock is unknown or expired
	CodeSessionCannotLock             // the session is held by another receiver
	CodeTimeout                       // nothing arrived within the caller's time limit
	CodeEntityExists                  // create of an entity (or rule) whose name is taken
	CodeMessageNotFound               // no message with that sequence number in that state
	CodeMessageTooLarge               // the message exceeds the entity's maximum size
	CodeQuotaExceeded                 // the entity is full
	CodeBadRequest                    // the request is malformed or violates a rule
	CodeEntityDisabled                // the entity's status forbids the operation
	CodeRuleNotFound                  // the named rule does not exist
	CodeConflict                      // a concurrent change won (update of a changed entity)
	CodeServerBusy                    // the broker cannot take the operation now (storage fault); retry later
	CodeOutcomeUnknown                // the disk failed under the write: it may or may not be stored; retry
)

var codeNames = [...]string{
	CodeInternal:          "internal",
	CodeNotFound:          "not found",
	CodeLockLost:          "lock lost",
	CodeSessionLockLost:   "session lock lost",
	CodeSessionCannotLock: "session cannot be locked",
	CodeTimeout:           "timeout",
	CodeEntityExists:      "entity already exists",
	CodeMessageNotFound:   "message not found",
	CodeMessageTooLarge:   "message too large",
	CodeQuotaExceeded:     "quota exceeded",
	CodeBadRequest:        "bad request",
	CodeEntityDisabled:    "entity disabled",
	CodeRuleNotFound:      "rule not found",
	CodeConflict:          "conflict",
	CodeServerBusy:        "server busy",
	CodeOutcomeUnknown:    "outcome unknown",
}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", c)
}

// Error is the error type every core operation returns for expected
// failures. Match it with [errors.Is] against the sentinels below (which
// compare by Code) or extract it with [errors.As].
type Error struct {
	Code Code
	Msg  string // human readable, in Service Bus wording where one exists
	// cause is the underlying error (a storage fault), for errors.Is
	// against storage's sentinels and for logs; nil for most errors.
	cause error
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return "core: " + e.Code.String()
	}
	return "core: " + e.Msg
}

// Unwrap returns the underlying error, if any (a storage fault such as
// storage.ErrNoSpace).
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, core.ErrLockLost) works for any message text.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// Sentinels for errors.Is.
var (
	ErrNotFound          = &Error{Code: CodeNotFound}
	ErrLockLost          = &Error{Code: CodeLockLost}
	ErrSessionLockLost   = &Error{Code: CodeSessionLockLost}
	ErrSessionCannotLock = &Error{Code: CodeSessionCannotLock}
	ErrTimeout           = &Error{Code: CodeTimeout}
	ErrEntityExists      = &Error{Code: CodeEntityExists}
	ErrMessageNotFound   = &Error{Code: CodeMessageNotFound}
	ErrMessageTooLarge   = &Error{Code: CodeMessageTooLarge}
	ErrQuotaExceeded     = &Error{Code: CodeQuotaExceeded}
	ErrBadRequest        = &Error{Code: CodeBadRequest}
	ErrEntityDisabled    = &Error{Code: CodeEntityDisabled}
	ErrRuleNotFound      = &Error{Code: CodeRuleNotFound}
	ErrServerBusy        = &Error{Code: CodeServerBusy}
	ErrOutcomeUnknown    = &Error{Code: CodeOutcomeUnknown}
	ErrClosed            = &Error{Code: CodeInternal, Msg: "broker closed"}
)

// CodeOf returns the Code of err, or CodeInternal when err is not a core
// error.
//
// It allocates nothing: the fronts ask it of every settlement's result,
// nil ones included (errors.As with a local target moved the target to
// the heap on every call, two allocations per delivery + completion).
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return CodeInternal
}

func errf(code Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

func entityNotFound(path string) error {
	return errf(CodeNotFound, "The messaging entity '%s' could not be found.", path)
}

func lockLost() error {
	return &Error{Code: CodeLockLost, Msg: "The lock supplied is invalid. Either the lock expired, or the message has already been removed from the queue."}
}
