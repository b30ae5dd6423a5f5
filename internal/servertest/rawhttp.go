package servertest

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/switchyard-llm/switchyard/internal/testwait"
)

// RawRequest writes req, bytes as given, on a fresh connection to addr and
// returns everything the server answers until it closes (at most 10 s). With
// trickle, a chunked body that never ends follows: one space (valid JSON
// whitespace) a chunk every 20 ms; that writer is joined before returning.
func RawRequest(t testing.TB, addr, req string, trickle bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := 0; trickle && i < 200; i++ {
			if _, err := io.WriteString(c, "1\r\n \r\n"); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	b, _ := io.ReadAll(bufio.NewReader(c))
	c.Close() // ends a trickle still writing
	testwait.Recv(t, wrote, "the trickling body's writer to stop")
	return string(b)
}
