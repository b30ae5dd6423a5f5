package mockengine

// The scheduler's side of the prefix cache (prefixcache.go): prefills wait in
// arrival order and run one at a time, each taking PrefillPerToken per prompt
// token the cache did not hold; a request's first token comes at the first step
// after its prefill ends, while the running requests go on decoding every step.
// The cache is looked up when a prefill starts and its blocks are cached when it
// ends, so a burst of requests sharing a new prefix hits from the second one on,
// once the first one's prefill is done.
//
// Time is a duration since an origin the caller picks, passed in (AddAt,
// StepAt); the scheduler never reads a clock for it.

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/switchyard-llm/switchyard/wire"
)

// CacheConfig turns the scheduler's prefix cache on.
type CacheConfig struct {
	Blocks          int            // capacity; 0 = no cache (and no prefill time, no events)
	BlockSize       int            // tokens per block; 0 = DefaultBlockSize
	PrefillPerToken time.Duration  // prefill time per uncached prompt token
	Events          bool           // keep KV events for TakeCacheEvents
	Counters        *CacheCounters // added to as requests are prefilled; nil = none
}

// CacheCounters are an engine's prefix-cache counters for readers in the same
// process (the bench): the engine adds to them, anyone may load them. Several
// engines may share one.
type CacheCounters struct {
	Requests      atomic.Int64 // prompts looked up (skip_reading_prefix_cache ones are not, as in vLLM)
	Queries       atomic.Int64 // prompt tokens looked up
	Hits          atomic.Int64 // of which found cached
	PrefillTokens atomic.Int64 // prompt tokens prefilled (not cached), every request
	PrefillTime   atomic.Int64 // simulated prefill time, nanoseconds
}

// PrefixCacheStats is vLLM's PrefixCacheStats (vllm/v1/metrics/stats.py): one
// step's lookups, in scheduler_stats.prefix_cache_stats. The mock never preempts.
type PrefixCacheStats struct {
	Reset             bool  `msgpack:"reset"` // reset_prefix_cache succeeded since the last step
	Requests          int64 `msgpack:"requests"`
	Queries           int64 `msgpack:"queries"` // prompt tokens
	Hits              int64 `msgpack:"hits"`    // of which cached
	PreemptedRequests int64 `msgpack:"preempted_requests"`
	PreemptedQueries  int64 `msgpack:"preempted_queries"`
	PreemptedHits     int64 `msgpack:"preempted_hits"`
}

// kvState is the Scheduler's cache state; nil when the cache is off.
type kvState struct {
	cache    *PrefixCache
	per      time.Duration
	waiting  []*request    // prefills in arrival order; the head may be running
	free     time.Duration // when the prefill stage is next free
	stats    PrefixCacheStats
	counters *CacheCounters
}

// reqKV is a request's cache state.
type reqKV struct {
	creq     CacheRequest
	seq      *CacheSeq // from the prefill's start
	arrived  time.Duration
	doneAt   time.Duration
	started  bool
	cached   int  // prompt tokens found cached
	remoteKV bool // its KV came from a prefill engine (P/D): no prefill time
}

// EnableCache gives the scheduler a prefix cache. Call it before the first Add.
func (s *Scheduler) EnableCache(c CacheConfig) {
	if c.Blocks <= 0 {
		s.kv = nil
		return
	}
	bs := c.BlockSize
	if bs <= 0 {
		bs = DefaultBlockSize
	}
	s.kv = &kvState{cache: NewPrefixCache(c.Blocks, bs, c.Events), per: c.PrefillPerToken, counters: c.Counters}
}

// Cache is the scheduler's prefix cache; nil when off.
func (s *Scheduler) Cache() *PrefixCache {
	if s.kv == nil {
		return nil
	}
	return s.kv.cache
}

// queuePrefill puts a new request in the prefill queue (cache on).
func (s *Scheduler) queuePrefill(now time.Duration, q *request, r *wire.EngineCoreRequest) {
	k := &reqKV{arrived: now, creq: CacheRequest{Prompt: slices.Clone(r.PromptTokenIDs), Salt: r.CacheSalt.Value}}
	if l := r.LoRA; l != nil {
		k.creq.LoRAName, k.creq.LoRAID = l.Name, l.IntID
	}
	if sp := r.Sampling; sp != nil {
		k.creq.SkipRead = sp.SkipReadingPrefixCache.Valid && sp.SkipReadingPrefixCache.Value
	}
	k.remoteKV = s.pd != nil && s.pd.role == RoleDecode && kvTransferParams(r)["do_remote_prefill"] == true
	q.kv = k
	s.kv.waiting = append(s.kv.waiting, q)
}

// admitPrefills runs the prefill queue up to now: every prefill that has ended
// caches its blocks and joins the running requests; the next one starts when
// the previous one ended (or when it arrived, if later).
func (s *Scheduler) admitPrefills(now time.Duration) {
	k := s.kv
	for len(k.waiting) > 0 {
		q := k.waiting[0]
		if !q.kv.started {
			s.startPrefill(q, max(k.free, q.kv.arrived))
		}
		if q.kv.doneAt > now {
			return
		}
		k.cache.Commit(q.kv.seq, len(q.kv.creq.Prompt))
		k.free = q.kv.doneAt
		k.waiting[0] = nil
		k.waiting = k.waiting[1:]
		s.running = append(s.running, q)
	}
}

// startPrefill looks q's prompt up, as vLLM does when it first schedules a
// request, and counts the lookup in this step's stats.
func (s *Scheduler) startPrefill(q *request, start time.Duration) {
	k, r := s.kv, q.kv
	r.seq, r.cached = k.cache.Start(r.creq)
	r.started = true
	uncached := len(r.creq.Prompt) - r.cached
	d := time.Duration(uncached) * k.per
	if r.remoteKV {
		d = 0
	}
	r.doneAt = start + d
	if !r.creq.SkipRead {
		k.stats.Requests++
		k.stats.Queries += int64(len(r.creq.Prompt))
		k.stats.Hits += int64(r.cached)
	}
	if c := k.counters; c != nil {
		if !r.creq.SkipRead {
			c.Requests.Add(1)
			c.Queries.Add(int64(len(r.creq.Prompt)))
			c.Hits.Add(int64(r.cached))
		}
		c.PrefillTokens.Add(int64(uncached))
		c.PrefillTime.Add(int64(d))
	}
}

// appendTokens adds a step's tokens to a running request's cached sequence.
func (s *Scheduler) appendTokens(q *request, toks []int64) {
	if q.kv != nil && q.kv.seq != nil {
		s.kv.cache.Append(q.kv.seq, toks...)
	}
}

// release frees a request's blocks (finished or aborted) and drops it from the
// prefill queue if it is still there.
func (s *Scheduler) release(q *request) {
	if q.kv == nil {
		return
	}
	k := s.kv
	if i := slices.Index(k.waiting, q); i >= 0 {
		if i == 0 && q.kv.started {
			k.free = q.kv.doneAt // the prefill in flight runs to its end
		}
		k.waiting = slices.Delete(k.waiting, i, i+1)
	}
	if q.kv.seq != nil {
		k.cache.Release(q.kv.seq)
		q.kv.seq = nil
	}
}

// TakeCacheEvents appends the KV events since the last call (cache on, with
// CacheConfig.Events).
func (s *Scheduler) TakeCacheEvents(dst []CacheEvent) []CacheEvent {
	if s.kv == nil {
		return dst
	}
	return s.kv.cache.TakeEvents(dst)
}

// ResetCache is the reset_prefix_cache utility: force is its
// reset_running_requests argument. ok is vLLM's answer; on is false when the
// cache is off (the mock then answers true, as before).
func (s *Scheduler) ResetCache(force bool) (ok, on bool) {
	if s.kv == nil {
		return true, false
	}
	if ok = s.kv.cache.Reset(force); ok {
		s.kv.stats.Reset = true
	}
	return ok, true
}

// TakePrefixCacheStats returns the lookups since the last call and starts
// afresh, as vLLM's make_prefix_cache_stats does each step; false when the
// cache is off.
func (s *Scheduler) TakePrefixCacheStats() (PrefixCacheStats, bool) {
	if s.kv == nil {
		return PrefixCacheStats{}, false
	}
	st := s.kv.stats
	s.kv.stats = PrefixCacheStats{}
	return st, true
}

// schedulerStatsMsgpack is scheduler_stats with prefix_cache_stats, in vLLM's
// SchedulerStats order.
type schedulerStatsMsgpack struct {
	NumRunningReqs   int64            `msgpack:"num_running_reqs"`
	NumWaitingReqs   int64            `msgpack:"num_waiting_reqs"`
	StepCounter      int64            `msgpack:"step_counter"`
	CurrentWave      int64            `msgpack:"current_wave"`
	KVCacheUsage     float64          `msgpack:"kv_cache_usage"`
	PrefixCacheStats PrefixCacheStats `msgpack:"prefix_cache_stats"`
}

// withPrefixCacheStats returns st with its Raw form carrying p, the way wire
// keeps nested stats: every release's SchedulerStats has prefix_cache_stats.
func withPrefixCacheStats(st wire.SchedulerStats, p PrefixCacheStats) wire.SchedulerStats {
	b, err := msgpack.Marshal(&schedulerStatsMsgpack{NumRunningReqs: st.NumRunningReqs, NumWaitingReqs: st.NumWaitingReqs,
		StepCounter: st.StepCounter, CurrentWave: st.CurrentWave, KVCacheUsage: st.KVCacheUsage, PrefixCacheStats: p})
	if err == nil {
		st.Raw = b
	}
	return st
}
