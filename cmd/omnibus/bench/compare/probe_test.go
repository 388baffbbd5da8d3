package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
)

func TestFreePortsDistinct(t *testing.T) {
	ports, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: want 5 distinct positive ports", ports)
		}
		seen[p] = true
	}
}

func TestWaitOpen(t *testing.T) {
	a, err := app.Start(app.Options{Memory: true, AMQPAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPSAddr: "-", AMQPSAddr: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	before := time.Now()
	at, err := waitOpen(ctx, "amqp://"+a.AMQPAddr().String(), app.DefaultKeyName, app.DefaultKey)
	if err != nil {
		t.Fatal(err)
	}
	if at.Before(before) || time.Since(at) < 0 {
		t.Errorf("open at %v, not within the call", at)
	}
}

func TestWaitOpenGivesUp(t *testing.T) {
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := waitOpen(ctx, fmt.Sprintf("amqp://127.0.0.1:%d", ports[0]), "", ""); err == nil {
		t.Error("waitOpen succeeded with nothing listening")
	}
}
