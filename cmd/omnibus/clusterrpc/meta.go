package clusterrpc

import (
	"context"

	"github.com/omnibusmq/omnibus/core"
)

// Meta answers a request to the meta group's leader other than a
// placement (forgetting or confirming one, the namespace registry's
// changes): the caller encodes the request and its answer, this package
// carries them as bytes.
type Meta func(ctx context.Context, req []byte) ([]byte, error)

// Meta sends req to the peer (the meta group's leader) and returns its
// answer. A broken connection leaves its outcome unknown.
func (c *Client) Meta(ctx context.Context, req []byte) ([]byte, error) {
	e := &enc{}
	e.bytes(req)
	d, err := c.call(context.WithoutCancel(ctx), opMeta, 0, e.b, true, nil)
	if err != nil {
		return nil, err
	}
	ans := append([]byte(nil), d.bytes()...)
	return ans, d.err
}

// meta answers a Meta call.
func (c *serverConn) meta(id uint64, args []byte) {
	d := &dec{b: args}
	req := d.bytes()
	if d.err != nil {
		c.answerErr(id, d.err)
		return
	}
	if c.s.Meta == nil {
		c.answerErr(id, &core.Error{Code: core.CodeServerBusy, Msg: "this node does not lead the meta group; retry"})
		return
	}
	ans, err := c.s.Meta(context.Background(), req)
	if err != nil {
		c.answerErr(id, err)
		return
	}
	e := &enc{}
	e.bytes(ans)
	_ = c.fc.write(append(append(binaryID(id), statusOK), e.b...))
}
