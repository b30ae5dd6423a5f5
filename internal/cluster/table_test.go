package cluster

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTablePlace(t *testing.T) {
	var tab Table
	for i, n := range []string{"a", "b", "c"} {
		c, isNew, err := tab.Place(n, "tcp://h:1"+n, "tcp://h:2"+n)
		if err != nil || !isNew || c.Index != i {
			t.Fatalf("place %s: %+v %v %v", n, c, isNew, err)
		}
		tab = append(tab, c)
	}
	// A restart on the same addresses keeps its index.
	c, isNew, err := tab.Place("b", "tcp://h:1b", "tcp://h:2b")
	if err != nil || isNew || c.Index != 1 {
		t.Fatalf("restart: %+v %v %v", c, isNew, err)
	}
	// On other addresses it is refused: engines hold the old ones.
	if _, _, err := tab.Place("b", "tcp://h:9", "tcp://h:2b"); err == nil || !strings.Contains(err.Error(), "same ones") {
		t.Fatalf("moved addresses: %v", err)
	}
	if _, _, err := tab.Place("d", "tcp://h:1a", "tcp://h:x"); err == nil {
		t.Fatal("a taken address was accepted")
	}
	in, out, err := Table{tab[2], tab[0], tab[1]}.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"tcp://h:1a", "tcp://h:1b", "tcp://h:1c"}, in); d != "" {
		t.Fatal(d)
	}
	if d := cmp.Diff([]string{"tcp://h:2a", "tcp://h:2b", "tcp://h:2c"}, out); d != "" {
		t.Fatal(d)
	}
	if _, _, err := (Table{tab[0], tab[2]}).Addresses(); err == nil {
		t.Fatal("a hole in the table was accepted")
	}
	// A freed index is reused first.
	if got := (Table{tab[0], tab[2]}).FreeIndex(); got != 1 {
		t.Fatalf("free index %d", got)
	}
}
