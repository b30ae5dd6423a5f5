package dispatcher

// The pure half of prefill/decode disaggregation (pd.go is the edge): whether a
// request is split at all, and the state of one pair, as plain values with methods
// and no IO, table-tested in pdcore_test.go.

// PDReason says why a request was prefilled by its decode engine itself (a plain
// ADD) instead of by a prefill engine. PDRemote is no fallback: the request is split.
type PDReason uint8

// Reasons, as the switchyard_pd_local_prefills_total{reason} label names them.
const (
	PDRemote        PDReason = iota
	PDShortPrompt            // the prompt is shorter than MinPromptTokens
	PDPrefillBusy            // every prefill engine's score is at or above BusyScore
	PDNoPrefill              // no prefill engine is up
	PDPrefillFailed          // every prefill attempt failed (engine died or refused the ADD)
	PDNoKVParams             // the prefill finished without kv_transfer_params (not capped by length, aborted, an error)
	PDUnsupported            // a request that cannot be split (pooling, streaming-input sessions)
	numPDReasons
)

var pdReasonNames = [numPDReasons]string{"remote", "short_prompt", "prefill_busy", "no_prefill_engine",
	"prefill_failed", "no_kv_transfer_params", "unsupported"}

func (r PDReason) String() string {
	if r < numPDReasons {
		return pdReasonNames[r]
	}
	return "unknown"
}

// pdPolicy is conditional disaggregation (Dynamo's idea): a prefill engine is worth
// the extra hop only for a prompt long enough, and only when one has room.
type pdPolicy struct {
	minPromptTokens int     // shorter prompts are prefilled locally; 0 = none
	busyScore       float64 // a prefill engine with Score >= this is busy; 0 = never
}

// decide is the choice for a prompt of promptLen tokens, given how many prefill
// engines are ready and the lowest Score among them.
func (p pdPolicy) decide(promptLen, readyPrefills int, minScore float64) PDReason {
	switch {
	case promptLen < p.minPromptTokens:
		return PDShortPrompt
	case readyPrefills == 0:
		return PDNoPrefill
	case p.busyScore > 0 && minScore >= p.busyScore:
		return PDPrefillBusy
	}
	return PDRemote
}

// pdPhase is where a pair is.
type pdPhase uint8

const (
	phPrefill pdPhase = iota // a prefill leg is live (or being resent)
	phDecode                 // the prefill part is over; the decode ADD is out or going out
	phDone                   // aborted by the client while prefilling
)

// pdEvent is what happened to a pair.
type pdEvent uint8

const (
	evPrefillFinished pdEvent = iota // the prefill leg's final output, with kv_transfer_params
	evPrefillNoParams                // its final output without them
	evPrefillFailed                  // the leg failed (engine down, refused, closed)
	evAbort                          // the client aborted the request
)

// pdAction is what the edge must do next.
type pdAction uint8

const (
	actNone         pdAction = iota
	actSendDecode            // send the decode ADD with the prefill's kv_transfer_params
	actSendLocal             // send a plain ADD to a decode engine (reason in pdPair.reason)
	actRetryPrefill          // send a new prefill leg to another prefill engine
	actAbortPrefill          // abort the live prefill leg
)

// pdPair is one split request's state: which phase it is in, the prefill legs sent,
// and the fallback reason once it has one.
type pdPair struct {
	phase       pdPhase
	legs        int // prefill legs sent
	maxLegs     int
	reason      PDReason
	failedRanks []int // prefill ranks whose leg failed, avoided by the next leg
}

// legSent records a prefill leg handed to a prefill engine.
func (p *pdPair) legSent() { p.legs++ }

// on applies ev and returns the action; events after the prefill part is over
// (a late failure of a finished leg, a second abort) change nothing.
func (p *pdPair) on(ev pdEvent) pdAction {
	if p.phase != phPrefill {
		return actNone
	}
	switch ev {
	case evPrefillFinished:
		p.phase = phDecode
		return actSendDecode
	case evPrefillNoParams:
		p.phase, p.reason = phDecode, PDNoKVParams
		return actSendLocal
	case evPrefillFailed:
		if p.legs < p.maxLegs {
			return actRetryPrefill
		}
		p.phase, p.reason = phDecode, PDPrefillFailed
		return actSendLocal
	case evAbort:
		p.phase = phDone
		return actAbortPrefill
	}
	return actNone
}
