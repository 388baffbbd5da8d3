package amqpserver

import (
	"errors"
	"fmt"

	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
	"github.com/omnibusmq/omnibus/amqpserver/internal/frames"
	"github.com/omnibusmq/omnibus/core"
	"github.com/omnibusmq/omnibus/core/sas"
)

// Service Bus specific error conditions (amqp.md §10).
const (
	condMessageLockLost     encoding.Symbol = "com.microsoft:message-lock-lost"
	condSessionLockLost     encoding.Symbol = "com.microsoft:session-lock-lost"
	condSessionCannotLock   encoding.Symbol = "com.microsoft:session-cannot-be-locked"
	condTimeout             encoding.Symbol = "com.microsoft:timeout"
	condMessageNotFound     encoding.Symbol = "com.microsoft:message-not-found"
	condEntityAlreadyExists encoding.Symbol = "com.microsoft:entity-already-exists"
	condEntityDisabled      encoding.Symbol = "com.microsoft:entity-disabled"
	condServerBusy          encoding.Symbol = "com.microsoft:server-busy"
	condDeadLetter          encoding.Symbol = "com.microsoft:dead-letter"
	condArgumentError       encoding.Symbol = "com.microsoft:argument-error"
)

// condition is one row of the error table: the AMQP condition a core
// error becomes on a link, in a disposition, or in a $management reply,
// and the status code of that reply.
type condition struct {
	cond   encoding.Symbol
	status int32 // $management / $cbs statusCode
}

// codeTable maps every core.Code to its AMQP condition and management
// status (amqp.md §6.1, §10). It is the only place the front translates
// core errors.
var codeTable = map[core.Code]condition{
	core.CodeInternal:          {frames.CondInternalError, 500},
	core.CodeNotFound:          {frames.CondNotFound, 404},
	core.CodeLockLost:          {condMessageLockLost, 410},
	core.CodeSessionLockLost:   {condSessionLockLost, 410},
	core.CodeSessionCannotLock: {condSessionCannotLock, 409},
	core.CodeTimeout:           {condTimeout, 408},
	core.CodeEntityExists:      {condEntityAlreadyExists, 409},
	core.CodeMessageNotFound:   {condMessageNotFound, 404},
	core.CodeMessageTooLarge:   {frames.CondMessageSizeExceeded, 413},
	core.CodeQuotaExceeded:     {frames.CondResourceLimitExceeded, 403},
	core.CodeBadRequest:        {frames.CondNotAllowed, 400},
	core.CodeEntityDisabled:    {condEntityDisabled, 400},
	core.CodeRuleNotFound:      {frames.CondNotFound, 404},
	core.CodeConflict:          {frames.CondPreconditionFailed, 412},
	core.CodeServerBusy:        {condServerBusy, 503},
	// The disk failed under the write, so whether it was done is unknown:
	// Service Bus's ServiceTimeout ("might or might not have successfully
	// completed the request"), which the Go, JS and .NET SDKs retry
	// (cmd/omnibus/README.md, Failure behaviour).
	core.CodeOutcomeUnknown: {condTimeout, 408},
}

// conditionOf returns the table row for err. SAS refusals are
// unauthorized-access (401); anything else unknown is an internal error.
func conditionOf(err error) condition {
	var se *sas.Error
	if errors.As(err, &se) {
		return condition{frames.CondUnauthorizedAccess, 401}
	}
	if c, ok := codeTable[core.CodeOf(err)]; ok {
		return c
	}
	return condition{frames.CondInternalError, 500}
}

// amqpError converts err to the AMQP error sent on the wire. The
// description is the core's Service Bus wording without the "core: "
// prefix.
func amqpError(err error) *frames.Error {
	var fe *frames.Error
	if errors.As(err, &fe) {
		return fe
	}
	return &frames.Error{Condition: conditionOf(err).cond, Description: description(err)}
}

// detachError is the error a receive link is detached with when taking
// messages for it failed with err. A failure worth retrying (server busy:
// in a cluster, the entity's group changing leaders; outcome unknown)
// detaches with amqp:link:detach-forced, as Service Bus does when an
// entity moves, so that the SDKs attach again: the Go SDK takes a link
// detached with com.microsoft:server-busy or com.microsoft:timeout for a
// passing error needing no recovery, keeps the dead link, and its
// receiver returns no message ever again, without an error.
func detachError(err error) *frames.Error {
	fe := amqpError(err)
	if fe.Condition == condServerBusy || fe.Condition == condTimeout {
		return &frames.Error{Condition: frames.CondDetachForced, Description: fe.Description}
	}
	return fe
}

// description returns the human-readable part of err.
func description(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) && ce.Msg != "" {
		return ce.Msg
	}
	var se *sas.Error
	if errors.As(err, &se) {
		return se.Detail
	}
	return err.Error()
}

// errorf builds an AMQP error with a condition and a formatted description.
func errorf(cond encoding.Symbol, format string, args ...any) *frames.Error {
	return &frames.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}
}

// connError is a failure that ends the whole connection (close with
// Err), as opposed to one that ends a session or a link.
type connError struct{ Err *frames.Error }

func (e *connError) Error() string { return "amqpserver: connection error: " + e.Err.Error() }

// closeWith returns a connError for the condition.
func closeWith(cond encoding.Symbol, format string, args ...any) error {
	return &connError{Err: errorf(cond, format, args...)}
}

// notFoundError is the Service Bus description for an unknown entity,
// which the JS SDK matches to recognise MessagingEntityNotFound.
func (c *conn) notFoundError(path string) *frames.Error {
	return errorf(frames.CondNotFound, "The messaging entity 'sb://%s/%s' could not be found.", c.namespace().Name(), path)
}
