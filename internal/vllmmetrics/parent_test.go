package vllmmetrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-llm/switchyard/wire"
)

// A client request of n choices records its n and its longest choice once, when
// the last choice finishes, whichever engines they finished on; a request of its
// own records n = 1 and its own length.
func TestParentRecordedOnce(t *testing.T) {
	m, err := New(prometheus.NewRegistry(), "m", 4096)
	if err != nil {
		t.Fatal(err)
	}
	engs := []*Engine{m.Engine(0, 0), m.Engine(1, 0)}
	p := NewParent(4)
	now := time.Now()
	var wg sync.WaitGroup
	for i, gen := range []int{3, 9, 1, 5} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r Request
			r.Start(now, 10, 16)
			r.SetParent(p)
			r.numGen = int64(gen)
			engs[i%2].Finish(&r, wire.FinishLength, now)
		}()
	}
	wg.Wait()
	count, sum := int64(0), 0.0
	nCount, nSum := int64(0), 0.0
	for _, e := range engs {
		c, s, _ := e.maxGen.Snapshot()
		count, sum = count+int64(c), sum+s
		c, s, _ = e.paramsN.Snapshot()
		nCount, nSum = nCount+int64(c), nSum+s
	}
	if count != 1 || sum != 9 || nCount != 1 || nSum != 4 {
		t.Errorf("max_num_generation_tokens %d obs sum %v, params_n %d obs sum %v; want one of 9 and one of 4", count, sum, nCount, nSum)
	}
	var own Request
	own.Start(now, 10, 16)
	own.numGen = 7
	engs[0].Finish(&own, wire.FinishLength, now)
	c0, s0, _ := engs[0].paramsN.Snapshot()
	c1, s1, _ := engs[1].paramsN.Snapshot()
	if c0+c1 != 2 || s0+s1 != 4+1 {
		t.Errorf("a request of its own: params_n %d obs sum %v, want the parent's 4 and its 1", c0+c1, s0+s1)
	}
}
