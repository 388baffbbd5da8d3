package wsconn

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// pair returns the server's stream and the client's WebSocket of one
// connection over loopback.
func pair(t *testing.T) (*Conn, *websocket.Conn) {
	t.Helper()
	got := make(chan *Conn, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		got <- New(ws)
	}))
	t.Cleanup(hs.Close)
	client, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	c := <-got
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	client.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c, client
}

// TestStreamAcrossMessages: reads join messages of any size, empty ones
// included, into one stream; each write is one binary message.
func TestStreamAcrossMessages(t *testing.T) {
	c, client := pair(t)
	for _, m := range []string{"ab", "", "c", "defgh", ""} {
		if err := client.WriteMessage(websocket.BinaryMessage, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, 8)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "abcdefgh" {
		t.Fatalf("read %q, %v; want abcdefgh", buf, err)
	}
	if _, err := c.Write([]byte("xyz")); err != nil {
		t.Fatal(err)
	}
	typ, p, err := client.ReadMessage()
	if err != nil || typ != websocket.BinaryMessage || !bytes.Equal(p, []byte("xyz")) {
		t.Fatalf("client read %d %q %v, want one binary message xyz", typ, p, err)
	}
}

// TestTextMessageAndClose: a text message fails the stream with
// ErrNotBinary and Close then says 1003; the peer's normal close reads
// as io.EOF.
func TestTextMessageAndClose(t *testing.T) {
	c, client := pair(t)
	if err := client.WriteMessage(websocket.TextMessage, []byte("hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 4)); !errors.Is(err, ErrNotBinary) {
		t.Fatalf("read after a text message: %v, want ErrNotBinary", err)
	}
	if _, err := c.Read(make([]byte, 4)); !errors.Is(err, ErrNotBinary) {
		t.Fatalf("second read: %v, want the same error", err)
	}
	c.Close()
	if _, _, err := client.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseUnsupportedData) {
		t.Fatalf("client saw %v, want close 1003", err)
	}

	c2, client2 := pair(t)
	if err := client2.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Read(make([]byte, 4)); err != io.EOF {
		t.Fatalf("read after the peer's close: %v, want io.EOF", err)
	}
}

// TestCloseDuringStuckWrite: Close does not wait for a write stuck on a
// peer that does not read; the write then fails.
func TestCloseDuringStuckWrite(t *testing.T) {
	c, _ := pair(t)
	c.SetWriteDeadline(time.Time{})
	wrote := make(chan error, 1)
	go func() {
		big := make([]byte, 64<<20) // more than the socket buffers hold
		_, err := c.Write(big)
		wrote <- err
	}()
	for !c.writing.Load() {
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the stuck write")
	}
	if err := <-wrote; err == nil {
		t.Fatal("the stuck write succeeded after Close")
	}
}

// TestDeadlinesFromAnotherGoroutine: deadlines may be set while another
// goroutine writes (as net.Conn allows; a server cuts connections so),
// and a write deadline in the past ends a write under way.
func TestDeadlinesFromAnotherGoroutine(t *testing.T) {
	c, _ := pair(t)
	c.SetWriteDeadline(time.Time{})
	wrote := make(chan error, 1)
	go func() {
		big := make([]byte, 1<<20)
		for {
			if _, err := c.Write(big); err != nil {
				wrote <- err
				return
			}
		}
	}()
	for !c.writing.Load() {
		time.Sleep(time.Millisecond)
	}
	c.SetDeadline(time.Now())
	select {
	case err := <-wrote:
		var ne interface{ Timeout() bool }
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("write ended with %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write deadline in the past did not end the write under way")
	}
}
