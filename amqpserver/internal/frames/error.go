package frames

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// Error is the AMQP error type (§2.8.14) carried by close, end, detach and
// the rejected outcome.
type Error struct {
	Condition   encoding.Symbol // mandatory, e.g. amqp:not-found
	Description string
	Info        encoding.Map // symbol keys
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Description == "" {
		return "amqp error " + string(e.Condition)
	}
	return "amqp error " + string(e.Condition) + ": " + e.Description
}

// Standard error conditions (§2.8.15 to §2.8.18) that a broker reports.
const (
	CondInternalError         encoding.Symbol = "amqp:internal-error"
	CondNotFound              encoding.Symbol = "amqp:not-found"
	CondUnauthorizedAccess    encoding.Symbol = "amqp:unauthorized-access"
	CondDecodeError           encoding.Symbol = "amqp:decode-error"
	CondResourceLimitExceeded encoding.Symbol = "amqp:resource-limit-exceeded"
	CondNotAllowed            encoding.Symbol = "amqp:not-allowed"
	CondInvalidField          encoding.Symbol = "amqp:invalid-field"
	CondNotImplemented        encoding.Symbol = "amqp:not-implemented"
	CondResourceLocked        encoding.Symbol = "amqp:resource-locked"
	CondPreconditionFailed    encoding.Symbol = "amqp:precondition-failed"
	CondResourceDeleted       encoding.Symbol = "amqp:resource-deleted"
	CondIllegalState          encoding.Symbol = "amqp:illegal-state"
	CondFrameSizeTooSmall     encoding.Symbol = "amqp:frame-size-too-small"

	CondConnectionForced encoding.Symbol = "amqp:connection:forced"
	CondFramingError     encoding.Symbol = "amqp:connection:framing-error"
	CondRedirect         encoding.Symbol = "amqp:connection:redirect"

	CondWindowViolation  encoding.Symbol = "amqp:session:window-violation"
	CondErrantLink       encoding.Symbol = "amqp:session:errant-link"
	CondHandleInUse      encoding.Symbol = "amqp:session:handle-in-use"
	CondUnattachedHandle encoding.Symbol = "amqp:session:unattached-handle"

	CondDetachForced          encoding.Symbol = "amqp:link:detach-forced"
	CondTransferLimitExceeded encoding.Symbol = "amqp:link:transfer-limit-exceeded"
	CondMessageSizeExceeded   encoding.Symbol = "amqp:link:message-size-exceeded"
	CondLinkRedirect          encoding.Symbol = "amqp:link:redirect"
	CondStolen                encoding.Symbol = "amqp:link:stolen"
)

// MarshalAMQP implements [encoding.Marshaler].
func (e *Error) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeError)
	f.symbolAlways(e.Condition)
	f.string(e.Description)
	if err := f.mapField(e.Info); err != nil {
		return err
	}
	f.end()
	return nil
}

// readError decodes an error composite, descriptor included.
func readError(r *buffer.Buffer) (*Error, error) {
	if err := expectDescriptor(r, codeError, "error"); err != nil {
		return nil, err
	}
	e := new(Error)
	err := decodeFields(r, "error", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			e.Condition, err = encoding.ReadSymbol(r)
		case 1:
			e.Description, err = encoding.ReadString(r)
		case 2:
			e.Info, err = encoding.ReadMap(r)
		default:
			err = skip(r)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// errorOrNil converts a possibly nil *Error into a Marshaler that is nil
// when e is, so absent errors encode as null.
func errorOrNil(e *Error) encoding.Marshaler {
	if e == nil {
		return nil
	}
	return e
}
