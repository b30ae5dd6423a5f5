package e2e

// The standing attack suite, control-plane side: the client protocol under
// --client-token flooded by connections that never authenticate (or guess),
// while an authenticated client is served beside them.

import (
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/internal/clientapi"
)

// Unauthenticated flood: 100 connections, each sending a wrong token and 200
// ADDs without reading, and one sending 20,000 ADDs. Each connection gets at
// most a handful of Unauthenticated replies (none queues up for a client
// that does not read), no ADD reaches an engine, the authenticated client
// loses nothing, and the footprint comes back to the baseline.
func TestAttackClientUnauthenticated(t *testing.T) {
	const token = "attack-token"
	tg := startTarget(t, "--client-token", token)
	tok, _ := msgpack.Marshal(token)
	good := dialClient(t, tg.client, "good")
	if err := good.sock.Send([]byte{clientapi.RequestAuth}, tok); err != nil {
		t.Fatal(err)
	}
	if f := good.run(t, "warm", 4, 3); f > 0 {
		t.Fatalf("warm-up: %d failed", f)
	}
	tg.base = sampleResources(t, tg.pid, tg.url("/metrics"))
	_, m := tg.get(t, "/metrics")
	servedBefore := countSuccess(string(m))

	const conns, each, flood = 100, 200, 20000
	wrong, _ := msgpack.Marshal("guess")
	add := addBody(t, "x", 3)
	sent := 0
	var attackers []*msgClient
	alongside(t, good, "unauthenticated", func() {
		for i := range conns {
			c := dialClient(t, tg.client, fmt.Sprintf("anon-%d", i))
			attackers = append(attackers, c)
			if err := c.sock.Send([]byte{clientapi.RequestAuth}, wrong); err != nil {
				t.Fatal(err)
			}
			for range each {
				if err := c.sock.Send(add...); err != nil {
					t.Fatal(err)
				}
			}
			sent += 1 + each
		}
		c := dialClient(t, tg.client, "anon-flood")
		attackers = append(attackers, c)
		for range flood {
			if err := c.sock.Send(add...); err != nil {
				t.Fatal(err)
			}
		}
		sent += flood
	})
	time.Sleep(time.Second) // the last replies arrive
	replies, refused := 0, 0
	for _, c := range attackers {
		n := len(c.in)
		replies += n
		if n > 8 {
			t.Errorf("an unauthenticated connection got %d replies, want at most 8", n)
		}
		for range n {
			var m [][]byte
			select {
			case m = <-c.in: // counted above: never waits
			default:
			}
			var e map[string]any
			if msgpack.Unmarshal(m[0], &e) == nil && e["type"] == clientapi.ErrTypeUnauthenticated {
				refused++
			}
		}
	}
	if refused != replies || replies == 0 {
		t.Errorf("%d replies to the unauthenticated, %d of them Unauthenticated", replies, refused)
	}
	_, m = tg.get(t, "/metrics")
	if served := countSuccess(string(m)) - servedBefore; served != 50 {
		t.Errorf("engines finished %v requests during the attack, want 50 (the authenticated client's)", served)
	}
	t.Logf("unauthenticated: %d messages sent on %d connections, %d replies (all Unauthenticated)", sent, conns+1, replies)
	for _, c := range attackers {
		c.close()
	}
	tg.finish(t, "client-unauthenticated", sent, 0, 96, 8)
}
