package frames

import (
	"github.com/omnibusmq/omnibus/amqpserver/internal/buffer"
	"github.com/omnibusmq/omnibus/amqpserver/internal/encoding"
)

// SASLCode is the result of a SASL exchange (part 5, §5.3.3.6).
type SASLCode uint8

// SASL outcome codes.
const (
	SASLOK      SASLCode = 0 // authentication succeeded
	SASLAuth    SASLCode = 1 // bad credentials
	SASLSys     SASLCode = 2 // system error
	SASLSysPerm SASLCode = 3 // unrecoverable system error
	SASLSysTemp SASLCode = 4 // transient system error
)

// SASLMechanisms advertises the server's mechanisms (§5.3.3.1).
type SASLMechanisms struct {
	Mechanisms []encoding.Symbol // mandatory, e.g. PLAIN, ANONYMOUS
}

// SASLInit selects a mechanism and carries the client's first response
// (§5.3.3.2).
type SASLInit struct {
	Mechanism       encoding.Symbol // mandatory
	InitialResponse []byte
	Hostname        string
}

// SASLChallenge carries a server challenge (§5.3.3.3).
type SASLChallenge struct {
	Challenge []byte // mandatory
}

// SASLResponse carries a client response (§5.3.3.4).
type SASLResponse struct {
	Response []byte // mandatory
}

// SASLOutcome ends the SASL exchange (§5.3.3.5).
type SASLOutcome struct {
	Code           SASLCode // mandatory
	AdditionalData []byte
}

func (*SASLMechanisms) frameType() Type { return TypeSASL }
func (*SASLInit) frameType() Type       { return TypeSASL }
func (*SASLChallenge) frameType() Type  { return TypeSASL }
func (*SASLResponse) frameType() Type   { return TypeSASL }
func (*SASLOutcome) frameType() Type    { return TypeSASL }

// MarshalAMQP implements [encoding.Marshaler].
func (s *SASLMechanisms) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSASLMechanisms)
	f.symbolsAlways(s.Mechanisms)
	f.end()
	return nil
}

func (s *SASLMechanisms) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "sasl-mechanisms", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		if i == 0 {
			s.Mechanisms, err = encoding.ReadSymbols(r)
			return err
		}
		return skip(r)
	})
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *SASLInit) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSASLInit)
	f.symbolAlways(s.Mechanism)
	f.binary(s.InitialResponse)
	f.string(s.Hostname)
	f.end()
	return nil
}

func (s *SASLInit) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "sasl-init", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			s.Mechanism, err = encoding.ReadSymbol(r)
		case 1:
			s.InitialResponse, err = encoding.ReadBinary(r)
		case 2:
			s.Hostname, err = encoding.ReadString(r)
		default:
			err = skip(r)
		}
		return err
	})
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *SASLChallenge) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSASLChallenge)
	f.binaryAlways(s.Challenge)
	f.end()
	return nil
}

func (s *SASLChallenge) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "sasl-challenge", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		if i == 0 {
			s.Challenge, err = encoding.ReadBinary(r)
			return err
		}
		return skip(r)
	})
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *SASLResponse) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSASLResponse)
	f.binaryAlways(s.Response)
	f.end()
	return nil
}

func (s *SASLResponse) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "sasl-response", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		if i == 0 {
			s.Response, err = encoding.ReadBinary(r)
			return err
		}
		return skip(r)
	})
}

// MarshalAMQP implements [encoding.Marshaler].
func (s *SASLOutcome) MarshalAMQP(w *buffer.Buffer) error {
	f := beginComposite(w, codeSASLOutcome)
	f.ubyte(uint8(s.Code))
	f.binary(s.AdditionalData)
	f.end()
	return nil
}

func (s *SASLOutcome) unmarshal(r *buffer.Buffer) error {
	return decodeFields(r, "sasl-outcome", 1<<0, func(i int, r *buffer.Buffer) (err error) {
		switch i {
		case 0:
			var c uint8
			c, err = encoding.ReadUbyte(r)
			s.Code = SASLCode(c)
		case 1:
			s.AdditionalData, err = encoding.ReadBinary(r)
		default:
			err = skip(r)
		}
		return err
	})
}
