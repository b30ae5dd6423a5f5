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

func TestCommandKilledAtItsDeadline(t *testing.T) {
	start := time.Now()
	err := Command(t, 100*time.Millisecond, "sleep", "30").Run()
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("sleep 30 bounded by 100ms: %v after %v", err, time.Since(start))
	}
}

func TestCommandRuns(t *testing.T) {
	out, err := Command(t, Deadline, "echo", "hi").Output()
	if err != nil || string(out) != "hi\n" {
		t.Fatalf("echo hi: %q, %v", out, err)
	}
}
