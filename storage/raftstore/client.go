package raftstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/storage/raftstore/peertls"
)

// Client asks members over their peer ports: status, membership changes,
// join tokens. It presents a member's certificate (creds; nil for a
// cluster whose peer ports run without TLS) and, for requests that change
// the cluster, the Authorization header admin returns (the Manage key's
// SAS token).
type Client struct {
	scheme string
	admin  func() string
	hc     *http.Client
}

// NewClient returns a Client; admin may be nil when only status is asked.
func NewClient(creds *peertls.Creds, admin func() string) *Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2,
		TLSHandshakeTimeout: 5 * time.Second,
	}
	c := &Client{scheme: "http", admin: admin, hc: &http.Client{Transport: tr}}
	if creds != nil {
		c.scheme = "https"
		tr.TLSClientConfig = creds.ClientConfig(0) // any member
	}
	return c
}

// CloseIdleConnections closes the connections kept for reuse.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// do sends a request to the member at addr and decodes a 200 answer's
// JSON into out; any other answer is an error with the body's text.
func (c *Client) do(ctx context.Context, method, addr, path string, in, out any, admin bool) (int, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+"://"+addr+path, body)
	if err != nil {
		return 0, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin {
		if c.admin == nil {
			return 0, errors.New("raftstore: no Manage key to sign an admin request with")
		}
		req.Header.Set("Authorization", c.admin())
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s: %s: %s", addr, resp.Status, strings.TrimSpace(string(raw)))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s: %w", addr, err)
		}
	}
	return resp.StatusCode, nil
}

// Status asks the member at addr for its status (what `omnibus cluster
// status` prints, and how a follower learns the leader's client
// addresses).
func (c *Client) Status(ctx context.Context, addr string) (Status, error) {
	var st Status
	_, err := c.do(ctx, http.MethodGet, addr, pathStatus, nil, &st, false)
	return st, err
}

// ChangeMembers asks the group to make change ch, through its leader: it
// asks the member at addr for the leader, then the leader, and returns
// once the change is applied there (an added member has caught up and
// votes) or ctx ends. While the member knows no leader (an election, as
// when the member being removed led and has just stopped), it asks
// again every leaderPoll until ctx ends.
func (c *Client) ChangeMembers(ctx context.Context, addr string, ch MemberChange) error {
	st, leaderAddr, err := c.leaderOf(ctx, addr)
	if err != nil {
		return err
	}
	if _, err := c.do(ctx, http.MethodPost, leaderAddr, pathMembers, ch, nil, true); err != nil {
		return fmt.Errorf("leader %d at %w", st.Leader, err)
	}
	return nil
}

// leaderPoll is how often ChangeMembers asks again for a leader.
const leaderPoll = 100 * time.Millisecond

// leaderOf asks the member at addr for its status until it names a leader
// whose address it knows, and returns that status and address; the error
// of the last try once ctx ends.
func (c *Client) leaderOf(ctx context.Context, addr string) (Status, string, error) {
	for {
		st, err := c.Status(ctx, addr)
		if err != nil {
			return st, "", err
		}
		if st.Leader == st.ID {
			return st, addr, nil
		}
		for _, m := range st.Members {
			if m.ID == st.Leader && st.Leader != 0 {
				return st, m.Addr, nil
			}
		}
		select {
		case <-ctx.Done():
			return st, "", fmt.Errorf("member %d at %s knows no leader (or not its address): %w", st.ID, addr, ctx.Err())
		case <-time.After(leaderPoll):
		}
	}
}

// JoinToken asks the member at addr for a join token for node, good for
// ttl (0: DefaultJoinTokenTTL).
func (c *Client) JoinToken(ctx context.Context, addr string, node uint64, ttl time.Duration) (string, error) {
	var a tokenAnswer
	secs := int64((ttl + time.Second - 1) / time.Second) // a part of a second counts as one
	_, err := c.do(ctx, http.MethodPost, addr, pathTokens, tokenRequest{Node: node, TTLSeconds: secs}, &a, true)
	return a.Token, err
}
