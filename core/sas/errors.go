package sas

import "errors"

// The reasons a token or key is refused. [Validator] wraps them in an
// [*Error]; test for them with [errors.Is].
var (
	ErrMissingToken       = errors.New("sas: missing token")
	ErrMalformedToken     = errors.New("sas: malformed token")
	ErrUnknownKey         = errors.New("sas: unknown key name")
	ErrInvalidSignature   = errors.New("sas: invalid signature")
	ErrExpiredToken       = errors.New("sas: expired token")
	ErrInvalidAudience    = errors.New("sas: invalid audience")
	ErrInsufficientRights = errors.New("sas: insufficient rights")
)

// Error is a refused token or key: one of the sentinel errors above plus a
// Service Bus style explanation.
type Error struct {
	// Err is one of the package's sentinel errors.
	Err error
	// Detail is the human-readable text Service Bus puts after the reason
	// in a 401 body, e.g. "The token is expired. Expiration time:
	// '2018-11-04 05:05:25Z'."
	Detail string
}

// Error returns the sentinel's text followed by the detail.
func (e *Error) Error() string {
	if e.Detail == "" {
		return e.Err.Error()
	}
	return e.Err.Error() + ": " + e.Detail
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the word Service Bus puts before the detail in a 401 body
// (rest.md §3.3): "MissingToken", "MalformedToken", "InvalidSignature",
// "ExpiredToken", "InvalidAudience" or, for a missing claim, "Unauthorized".
// An unknown key name is reported like a bad signature, as the service does.
func (e *Error) Reason() string {
	switch e.Err {
	case ErrMissingToken:
		return "MissingToken"
	case ErrMalformedToken:
		return "MalformedToken"
	case ErrUnknownKey, ErrInvalidSignature:
		return "InvalidSignature"
	case ErrExpiredToken:
		return "ExpiredToken"
	case ErrInvalidAudience:
		return "InvalidAudience"
	default:
		return "Unauthorized"
	}
}

// SubCode returns the Service Bus sub-code for the failure (rest.md §3.3):
// 40102 missing token, 40105 malformed, 40103 invalid signature or unknown
// key, 40106 expired, 40104 invalid audience, 40100 otherwise.
func (e *Error) SubCode() int {
	switch e.Err {
	case ErrMissingToken:
		return 40102
	case ErrMalformedToken:
		return 40105
	case ErrUnknownKey, ErrInvalidSignature:
		return 40103
	case ErrExpiredToken:
		return 40106
	case ErrInvalidAudience:
		return 40104
	default:
		return 40100
	}
}

// refuse builds an *Error.
func refuse(sentinel error, detail string) *Error {
	return &Error{Err: sentinel, Detail: detail}
}
