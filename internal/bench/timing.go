package bench

import (
	"time"

	"github.com/switchyard-llm/switchyard/internal/bench/engine"
)

// EngineRecord is what a bench engine notes about one request it served.
type EngineRecord = engine.Record

// ClientRecord is what the client side notes about one request, in wall-clock
// nanoseconds (time.Now().UnixNano()): one clock for this process and for child
// engines on the same host. Seq is the request's index in the run.
type ClientRecord struct {
	Submit    int64 // just before the ADD left the client (socket send or Submit call)
	FirstRecv int64 // the first output reached the client; 0 if none did
	LastRecv  int64 // the final output reached the client; 0 if it did not finish
	Tokens    int32 // output tokens received
	Failed    bool  // the request ended in an error (counted, not timed)
}

// Timings are the joined figures of one phase. Not safe for concurrent use.
type Timings struct {
	Dispatch   *Hist // client submit -> ADD received by the engine
	Return     *Hist // engine sent the first output -> the client received it
	ReturnLast *Hist // engine sent the final output -> the client received it
	Overhead   *Hist // Dispatch + Return of the same request: the frontend's share of TTFT
	// OverheadLast is Dispatch + ReturnLast: the frontend's share of a non-streaming
	// answer, which the client receives only after the final output.
	OverheadLast *Hist
	TTFT         *Hist // client submit -> first output received
	E2E          *Hist // client submit -> final output received
	PerRank      []int64
	Measured     int64 // requests in the measured window that finished
	Failed       int64 // requests in the measured window that failed
	Unmatched    int64 // finished requests no engine record was found for
	Tokens       int64 // output tokens of measured requests
}

func newTimings(ranks int) *Timings {
	return &Timings{
		Dispatch: NewHist(), Return: NewHist(), ReturnLast: NewHist(), Overhead: NewHist(), OverheadLast: NewHist(),
		TTFT: NewHist(), E2E: NewHist(), PerRank: make([]int64, ranks),
	}
}

// Join matches engine records to client records by sequence number and fills the
// histograms. Only requests with Submit >= from are measured (warm-up is excluded);
// ranks sizes the per-rank counts. clients is indexed by Seq.
func Join(clients []ClientRecord, engines []EngineRecord, from int64, ranks int) *Timings {
	t := newTimings(ranks)
	matched := make([]bool, len(clients))
	for _, e := range engines {
		if e.Seq < 0 || e.Seq >= int64(len(clients)) {
			continue // not ours (another client of a shared frontend)
		}
		c := &clients[e.Seq]
		if c.Submit < from || c.Failed || c.LastRecv == 0 {
			continue
		}
		matched[e.Seq] = true
		if int(e.Rank) >= 0 && int(e.Rank) < len(t.PerRank) {
			t.PerRank[e.Rank]++
		}
		d := time.Duration(e.Add - c.Submit)
		r := time.Duration(c.FirstRecv - e.FirstSend)
		t.Dispatch.Record(d)
		t.Return.Record(r)
		t.Overhead.Record(d + r)
		if e.LastSend != 0 {
			t.ReturnLast.Record(time.Duration(c.LastRecv - e.LastSend))
			t.OverheadLast.Record(d + time.Duration(c.LastRecv-e.LastSend))
		}
	}
	for i := range clients {
		c := &clients[i]
		if c.Submit == 0 || c.Submit < from {
			continue
		}
		if c.Failed {
			t.Failed++
			continue
		}
		if c.LastRecv == 0 {
			continue // still in flight when the phase ended
		}
		t.Measured++
		t.Tokens += int64(c.Tokens)
		t.TTFT.Record(time.Duration(c.FirstRecv - c.Submit))
		t.E2E.Record(time.Duration(c.LastRecv - c.Submit))
		if !matched[i] && len(engines) > 0 {
			t.Unmatched++
		}
	}
	return t
}
