package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestRunIsFree(t *testing.T) {
	base, err := Run("127.0.0.1", 4)
	if err != nil {
		t.Fatal(err)
	}
	for p := base; p < base+4; p++ {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d of the run is taken: %v", p, err)
		}
		l.Close()
	}
}
