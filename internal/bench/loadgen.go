package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-llm/switchyard/wire"
)

// conn is one way of reaching a frontend (or the relay): the msgpack client protocol
// over a DEALER, the in-process dispatcher, or HTTP. submit sends request seq; the conn
// reports every output to the load's sink from its own goroutine(s).
type conn interface {
	submit(seq int64, req *wire.EngineCoreRequest) error
	close() error
}

// sink receives what a conn hears back. Calls for one request never overlap.
type sink interface {
	output(seq int64, tokens int, finished bool, now int64)
	failed(seq int64, now int64)
}

const (
	chunkBits = 16
	chunkSize = 1 << chunkBits
	maxChunks = 1 << 12 // 268 M requests per phase
)

// load is the client side of one phase: the schedule, the per-request records and the
// inter-token histogram. The sender goroutine owns Submit fields; the conn's receiver
// owns the rest of a record until the phase ends (different fields, so no lock).
type load struct {
	cfg    Config
	chunks [maxChunks]atomic.Pointer[[chunkSize]ClientRecord]
	n      atomic.Int64 // requests submitted
	from   atomic.Int64 // measured window: submissions at or after from
	to     atomic.Int64 // and the window's end (for throughput)

	mu        sync.Mutex // guards itl (conns with several receivers)
	itl       *Hist
	lastRecv  map[int64]int64 // seq -> previous output's arrival, for ITL
	lag       *Hist           // how late each open-loop send was against its schedule
	done      chan struct{}   // closed loop: one token per finished request
	inflight  atomic.Int64
	winTokens atomic.Int64 // output tokens received inside the window
	winDone   atomic.Int64 // requests finished inside the window
	idBuf     []byte
}

func newLoad(cfg Config) *load {
	return &load{cfg: cfg, itl: NewHist(), lag: NewHist(), lastRecv: map[int64]int64{},
		done: make(chan struct{}, max(cfg.Concurrency, 1)+1)}
}

func (l *load) rec(seq int64) *ClientRecord {
	c := l.chunks[seq>>chunkBits].Load()
	return &c[seq&(chunkSize-1)]
}

// records returns the records of every submitted request, indexed by seq.
func (l *load) records() []ClientRecord {
	n := l.n.Load()
	out := make([]ClientRecord, n)
	for i := int64(0); i < n; i += chunkSize {
		copy(out[i:], l.chunks[i>>chunkBits].Load()[:min(chunkSize, n-i)])
	}
	return out
}

func (l *load) output(seq int64, tokens int, finished bool, now int64) {
	r := l.rec(seq)
	if r.FirstRecv == 0 {
		r.FirstRecv = now
	}
	r.Tokens += int32(tokens)
	inWin := now >= l.from.Load() && now <= l.to.Load()
	if inWin {
		l.winTokens.Add(int64(tokens))
	}
	l.mu.Lock()
	if prev, ok := l.lastRecv[seq]; ok && inWin {
		l.itl.Record(time.Duration(now - prev))
	}
	if finished {
		delete(l.lastRecv, seq)
	} else {
		l.lastRecv[seq] = now
	}
	l.mu.Unlock()
	if finished {
		r.LastRecv = now
		if inWin {
			l.winDone.Add(1)
		}
		l.finish()
	}
}

func (l *load) failed(seq int64, now int64) {
	l.rec(seq).Failed = true
	l.mu.Lock()
	delete(l.lastRecv, seq)
	l.mu.Unlock()
	l.finish()
}

func (l *load) finish() {
	l.inflight.Add(-1)
	if l.cfg.Rate == 0 {
		select {
		case l.done <- struct{}{}:
		default:
		}
	}
}

// request builds request seq. The prompt's first token is seq and its second the
// marker, which is how the engines' records are joined to ours (engine.go).
func (l *load) request(seq int64, req *wire.EngineCoreRequest, sp *wire.SamplingParams, prompt []int64) {
	prompt[0], prompt[1] = seq, promptMarker
	l.idBuf = strconv.AppendInt(append(l.idBuf[:0], "bench-"...), seq, 10)
	*req = wire.EngineCoreRequest{
		RequestID:      string(l.idBuf),
		PromptTokenIDs: prompt,
		Sampling:       sp,
		ArrivalTime:    float64(time.Now().UnixNano()) / 1e9,
	}
}

// seqOf parses a request id made by request; -1 for anything else.
func seqOf(id string) int64 {
	const p = "bench-"
	if len(id) <= len(p) || id[:len(p)] != p {
		return -1
	}
	n, err := strconv.ParseInt(id[len(p):], 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// run submits requests through c until the phase ends: Duration (or Requests measured
// requests) after a Warmup. It returns when the last request was submitted; the caller
// waits for the stragglers with drain.
func (l *load) run(ctx context.Context, c conn, start time.Time) error {
	from := start.Add(l.cfg.Warmup).UnixNano()
	end := start.Add(l.cfg.Warmup + l.cfg.Duration)
	l.from.Store(from)
	l.to.Store(end.UnixNano())
	if l.cfg.Requests > 0 {
		l.to.Store(1<<63 - 1) // set when the last measured request is submitted
	}
	sp := wire.DefaultSamplingParams()
	sp.MaxTokens = wire.SomeInt(int64(l.cfg.OutputTokens))
	sp.IgnoreEOS = true
	sp.Normalize()
	prompt := make([]int64, l.cfg.PromptTokens)
	for i := range prompt {
		prompt[i] = int64(100 + i)
	}
	var req wire.EngineCoreRequest
	var arr *Arrivals
	if l.cfg.Rate > 0 {
		arr = NewArrivals(l.cfg.Rate, l.cfg.Seed)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var measured int
	for seq := int64(0); ; seq++ {
		// Pace: open loop waits for the schedule, closed loop for a free slot.
		if arr != nil {
			at := start.Add(arr.Next())
			if d := time.Until(at); d > 0 {
				timer.Reset(d)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			l.lag.Record(time.Since(at))
		} else if seq >= int64(l.cfg.Concurrency) {
			select {
			case <-l.done:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		now := time.Now()
		if l.cfg.Requests == 0 && !now.Before(end) {
			return nil
		}
		if l.cfg.Requests > 0 && measured >= l.cfg.Requests {
			l.to.Store(now.UnixNano())
			return nil
		}
		if seq&(chunkSize-1) == 0 {
			l.chunks[seq>>chunkBits].Store(new([chunkSize]ClientRecord))
		}
		l.request(seq, &req, &sp, prompt)
		r := l.rec(seq)
		l.inflight.Add(1)
		r.Submit = nowNS()
		l.n.Store(seq + 1)
		if r.Submit >= from {
			measured++
		}
		if err := c.submit(seq, &req); err != nil {
			l.failed(seq, nowNS())
		}
	}
}

// drain waits until nothing is in flight or ctx ends.
func (l *load) drain(ctx context.Context) {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for l.inflight.Load() > 0 {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}
