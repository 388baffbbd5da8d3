package filter

import (
	"fmt"
	"strings"
)

// MaxActionStatements is the most SET/REMOVE statements one rule action
// may hold, the Service Bus quota of 32 expressions per action.
const MaxActionStatements = 32

// Action is a compiled SQL rule action: SET and REMOVE statements applied,
// in order, to a subscription's copy of a message that its rule's filter
// selected. It is immutable and safe for concurrent use.
type Action struct {
	expr  string
	stmts []statement
}

// statement is one SET or REMOVE.
type statement struct {
	target *propNode
	x      node // value for SET; nil for REMOVE
}

// CompileAction parses a rule action such as
//
//	SET sys.Label = 'routed'; SET hops = hops + 1; REMOVE secret
//
// Statements may be separated by ";" and a trailing ";" is allowed; as in
// Service Bus the separator is optional. System targets must be settable
// (for example sys.Label, not sys.SequenceNumber). Errors are *[ParseError].
func CompileAction(expr string) (*Action, error) {
	return CompileActionWithParameters(expr, nil)
}

// CompileActionWithParameters is [CompileAction] for an action with @name
// parameters, bound as [CompileWithParameters] binds them.
func CompileActionWithParameters(expr string, params map[string]any) (*Action, error) {
	p, err := newParser(expr, params)
	if err != nil {
		return nil, err
	}
	a := &Action{expr: expr}
	for p.peek().kind != tokEOF {
		t := p.peek()
		if len(a.stmts) == MaxActionStatements {
			return nil, p.errorf(t.pos, "rule action has more than %d statements", MaxActionStatements)
		}
		var st statement
		switch {
		case t.kind == tokIdent && strings.EqualFold(t.text, "SET"):
			st, err = p.parseSet()
		case t.kind == tokIdent && strings.EqualFold(t.text, "REMOVE"):
			st, err = p.parseRemove()
		default:
			err = p.unexpected("SET or REMOVE")
		}
		if err != nil {
			return nil, err
		}
		a.stmts = append(a.stmts, st)
		if p.peek().kind == tokSemicolon {
			p.next()
		}
	}
	if len(a.stmts) == 0 {
		return nil, p.unexpected("SET or REMOVE")
	}
	return a, nil
}

// parseTarget parses the property a statement changes.
func (p *parser) parseTarget(verb string) (*propNode, error) {
	t := p.peek()
	prop, err := p.parseProperty()
	if err != nil {
		return nil, err
	}
	if prop.sys {
		if sp, _ := lookupSysProp(prop.name); !sp.settable {
			return nil, p.errorf(t.pos, "cannot %s system property %s", verb, prop.name)
		}
	}
	return prop, nil
}

func (p *parser) parseSet() (statement, error) {
	p.next() // SET
	target, err := p.parseTarget("SET")
	if err != nil {
		return statement{}, err
	}
	if _, err := p.expect(tokEq, "'=' after SET target"); err != nil {
		return statement{}, err
	}
	start := p.peek().pos
	x, err := p.parseAdditive()
	if err != nil {
		return statement{}, err
	}
	if err := p.checkOperand(x, start); err != nil {
		return statement{}, err
	}
	return statement{target: target, x: x}, nil
}

func (p *parser) parseRemove() (statement, error) {
	p.next() // REMOVE
	target, err := p.parseTarget("REMOVE")
	if err != nil {
		return statement{}, err
	}
	return statement{target: target}, nil
}

// Apply runs the statements against m in order; each sees the effects of
// the ones before it. On error Apply stops, leaving earlier statements
// applied, so callers should apply actions to a copy they can discard.
// Evaluation errors are *[EvalError]; errors from [MutableMessage.SetSystem]
// are wrapped.
func (a *Action) Apply(m MutableMessage) error {
	for _, st := range a.stmts {
		if st.x == nil {
			if st.target.sys {
				if err := m.SetSystem(st.target.name, nil); err != nil {
					return fmt.Errorf("filter: REMOVE sys.%s: %w", st.target.name, err)
				}
				continue
			}
			m.RemoveProperty(st.target.name)
			continue
		}
		v, err := st.x.eval(m)
		if err != nil {
			return err
		}
		if st.target.sys {
			if err := m.SetSystem(st.target.name, v.toAny()); err != nil {
				return fmt.Errorf("filter: SET sys.%s: %w", st.target.name, err)
			}
			continue
		}
		m.SetProperty(st.target.name, v.toAny())
	}
	return nil
}

// Expression returns the source text the action was compiled from.
func (a *Action) Expression() string { return a.expr }

// String returns the canonical form, statements joined by "; ".
func (a *Action) String() string {
	var b strings.Builder
	for i, st := range a.stmts {
		if i > 0 {
			b.WriteString("; ")
		}
		if st.x == nil {
			b.WriteString("REMOVE ")
			st.target.format(&b)
			continue
		}
		b.WriteString("SET ")
		st.target.format(&b)
		b.WriteString(" = ")
		st.x.format(&b)
	}
	return b.String()
}
