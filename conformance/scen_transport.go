package conformance

import (
	"crypto/tls"
	"io"
	"net"
	"time"
)

// Transports: what an ordinary connection string reaches (AMQP over TLS
// on 5671) and AMQP over WebSockets, with both subprotocols the SDKs send
// and frames cut across messages. Skipped on an endpoint given only as an
// emulator connection string without --amqps or --websocket.

func init() {
	register(
		Scenario{Name: "tls-handshake", Seed: "Service Bus: AMQP over TLS on 5671 with a certificate valid for the host (TLS 1.2 or later)", Protocol: AMQP, Run: func(t *T) {
			addr, host := t.amqpsEndpoint()
			d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 30 * time.Second}, Config: t.target.tlsConfig(host)}
			nc, err := d.DialContext(t.ctx, "tcp", addr)
			t.must(err, "TLS handshake with %s", addr)
			defer nc.Close()
			tc := nc.(*tls.Conn)
			if v := tc.ConnectionState().Version; v < tls.VersionTLS12 {
				t.Errorf("TLS version %x, want 1.2 or later", v)
			}
			// The AMQP protocol header, answered over TLS.
			nc.SetDeadline(time.Now().Add(15 * time.Second))
			_, err = nc.Write([]byte("AMQP\x03\x01\x00\x00"))
			t.must(err, "writing the SASL protocol header")
			hdr := make([]byte, 8)
			_, err = io.ReadFull(nc, hdr)
			t.must(err, "reading the server's protocol header")
			if string(hdr) != "AMQP\x03\x01\x00\x00" {
				t.Fatalf("server answered % x, want the SASL protocol header", hdr)
			}
		}},
		Scenario{Name: "tls-sdk-ordinary-connection-string", Seed: "Service Bus: the SDKs send, receive and settle over AMQPS with a connection string without UseDevelopmentEmulator", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.sdkRoundTrip(t.TLSClient(), q, "over TLS")
		}},
		Scenario{Name: "websocket-sdk-amqp", Seed: "Service Bus: AMQP over WebSockets at /$servicebus/websocket with subprotocol amqp (.NET, Go); the SDK sends, receives and settles", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			t.sdkRoundTrip(t.WebSocketClient(), q, "over WebSockets")
		}},
		Scenario{Name: "websocket-amqpwsb10", Seed: "amqp-wsb-v1.0: subprotocol AMQPWSB10 (Java, JavaScript, Python) carries AMQP in binary messages", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			u := t.webSocketEndpoint()
			t.wireRoundTrip(t.AMQPOver(t.DialWebSocket("AMQPWSB10"), u.Hostname()), q, "over AMQPWSB10")
		}},
		Scenario{Name: "websocket-frames-split", Seed: "amqp-wsb-v1.0: AMQP frames may be split across WebSocket messages at any byte", Protocol: AMQP, Run: func(t *T) {
			q := t.Queue("cf-basic")
			u := t.webSocketEndpoint()
			nc := &chunkedStream{Conn: t.DialWebSocket("AMQPWSB10")}
			t.wireRoundTrip(t.AMQPOver(nc, u.Hostname()), q, "in pieces of 1 to 7 bytes")
		}},
	)
}
