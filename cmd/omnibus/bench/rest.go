package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/omnibusmq/omnibus/core/sas"
)

// restTransport drives omnibus's HTTP gateway: POST …/messages to send,
// POST …/messages/head to peek-lock and DELETE …/messages/{seq}/{lock}
// to complete, each request with a SAS token in Authorization.
type restTransport struct {
	c      *Config
	runID  string
	base   string // e.g. http://127.0.0.1:5300/queue
	client *http.Client
	token  string
}

func newRESTTransport(c *Config, runID string) *restTransport {
	base := strings.TrimRight(c.HTTPURL, "/") + "/" + strings.Trim(c.Queue, "/")
	conns := c.Connections * c.Links * (c.Inflight + 1 + restSettlers)
	return &restTransport{
		c: c, runID: runID, base: base,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxIdleConns: conns}},
		token:  sas.Sign(base, c.KeyName, c.Key, time.Now().Add(24*time.Hour)),
	}
}

func (t *restTransport) close(context.Context) { t.client.CloseIdleConnections() }

func (t *restTransport) sender(context.Context, int) (sender, error) { return t, nil }

func (t *restTransport) receiver(context.Context, int, int, string) (receiver, error) {
	return &restReceiver{t: t}, nil
}

func (t *restTransport) do(ctx context.Context, method, url string, body []byte, hdr http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", t.token)
	return t.client.Do(req)
}

// send implements sender: one POST per message, stamp in custom
// property headers (strings quoted, numbers bare, as the REST API types them).
func (t *restTransport) send(ctx context.Context, m outMsg, payload []byte) error {
	hdr := http.Header{}
	hdr.Set("Content-Type", "application/octet-stream")
	hdr.Set(propRun, strconv.Quote(t.runID))
	hdr.Set(propSeq, strconv.FormatUint(m.seq, 10))
	hdr.Set(propSent, strconv.FormatInt(m.sent.UnixNano(), 10))
	if m.session != "" {
		bp, _ := json.Marshal(map[string]string{"SessionId": m.session})
		hdr.Set("BrokerProperties", string(bp))
	}
	resp, err := t.do(ctx, http.MethodPost, t.base+"/messages", payload, hdr)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST messages: %s", resp.Status)
	}
	return nil
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

type restReceiver struct{ t *restTransport }

// restLock is what settle needs of a peek-locked message.
type restLock struct {
	SequenceNumber int64
	LockToken      string
}

func (r *restReceiver) receive(ctx context.Context) ([]inMsg, error) {
	for {
		resp, err := r.t.do(ctx, http.MethodPost, r.t.base+"/messages/head?timeout=5", nil, nil)
		if err != nil {
			return nil, err
		}
		drain(resp)
		switch resp.StatusCode {
		case http.StatusNoContent:
			continue // long poll ran out; ctx ends the loop
		case http.StatusCreated:
		default:
			return nil, fmt.Errorf("POST messages/head: %s", resp.Status)
		}
		var lock restLock
		if err := json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &lock); err != nil || lock.LockToken == "" {
			return nil, fmt.Errorf("peek-lock: BrokerProperties %q: no lock token", resp.Header.Get("BrokerProperties"))
		}
		in := inMsg{handle: lock}
		in.RunID, _ = strconv.Unquote(resp.Header.Get(propRun))
		seq, _ := strconv.ParseUint(resp.Header.Get(propSeq), 10, 64)
		ns, _ := strconv.ParseInt(resp.Header.Get(propSent), 10, 64)
		in.Seq, in.sent, in.BrokerSeq = seq, time.Unix(0, ns), lock.SequenceNumber
		var bp struct{ SessionId string }
		json.Unmarshal([]byte(resp.Header.Get("BrokerProperties")), &bp)
		in.Session = bp.SessionId
		return []inMsg{in}, nil
	}
}

func (r *restReceiver) settle(ctx context.Context, m inMsg) error {
	lock, ok := m.handle.(restLock)
	if !ok {
		return errors.New("bench: not a REST delivery")
	}
	url := fmt.Sprintf("%s/messages/%d/%s", r.t.base, lock.SequenceNumber, lock.LockToken)
	resp, err := r.t.do(ctx, http.MethodDelete, url, nil, nil)
	if err != nil {
		return err
	}
	drain(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("DELETE %s: %s", url, resp.Status)
	}
	return nil
}

// restSettlers is how many goroutines complete peek-locked messages for
// one REST receiver: each DELETE waits for a durable settlement, and the
// receive loop need not wait for it before locking the next message.
const restSettlers = 8

func (r *restReceiver) settlers() int { return restSettlers }

func (r *restReceiver) close(context.Context) {}
