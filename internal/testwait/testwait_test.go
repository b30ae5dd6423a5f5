package testwait

import (
	"sync"
	"testing"
	"time"
)

func TestRecvGetsValue(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, ch, "seven"); v != 7 {
		t.Fatalf("got %d", v)
	}
}

// fakeTB records a Fatalf instead of stopping the test.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.msg = format
}

func TestRecvWithinFailsNamingWhat(t *testing.T) {
	f := &fakeTB{TB: t}
	RecvWithin(f, make(chan int), 10*time.Millisecond, "nothing")
	if f.msg == "" {
		t.Fatal("no failure after the deadline")
	}
}

func TestWaitReturnsWhenDone(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	go wg.Done()
	Wait(t, &wg, "one goroutine")
}
