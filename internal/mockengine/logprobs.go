package mockengine

import (
	"encoding/binary"
	"math"

	"github.com/switchyard-llm/switchyard/wire"
)

// logprobRows builds a step's logprobs as vLLM's engine sends them (LogprobsLists:
// per generated token a row of the sampled token then the top-k, their logprobs,
// the sampled token's rank), with deterministic values: the sampled token is the
// most likely (rank 1, logprob -0.25), the alternatives follow from the sequence
// hash with logprobs -1.25, -2.25, ...
type logprobRows struct {
	ids   []int32
	lps   []float32
	ranks []int32
}

func (l *logprobRows) add(tok int64, h uint64, k int64) {
	l.ids = append(l.ids, int32(tok))
	l.lps = append(l.lps, -0.25)
	for j := range k {
		alt := tok
		if j > 0 {
			alt = tokenOf(seqHash(h, -int64(j)))
		}
		l.ids = append(l.ids, int32(alt))
		l.lps = append(l.lps, float32(-0.25-float64(j)))
	}
	l.ranks = append(l.ranks, 1)
}

// lists encodes the rows as the engine's int32/float32 arrays.
func (l *logprobRows) lists(k int64) *wire.LogprobsLists {
	rows := int64(len(l.ranks))
	ids := make([]byte, 4*len(l.ids))
	for i, v := range l.ids {
		binary.LittleEndian.PutUint32(ids[4*i:], uint32(v))
	}
	lps := make([]byte, 4*len(l.lps))
	for i, v := range l.lps {
		binary.LittleEndian.PutUint32(lps[4*i:], math.Float32bits(v))
	}
	ranks := make([]byte, 4*len(l.ranks))
	for i, v := range l.ranks {
		binary.LittleEndian.PutUint32(ranks[4*i:], uint32(v))
	}
	return &wire.LogprobsLists{
		LogprobTokenIDs:   wire.Tensor{DType: "int32", Shape: []int64{rows, k + 1}, Data: ids},
		Logprobs:          wire.Tensor{DType: "float32", Shape: []int64{rows, k + 1}, Data: lps},
		SampledTokenRanks: wire.Tensor{DType: "int32", Shape: []int64{rows}, Data: ranks},
	}
}

// promptLogprobs are the prompt's logprobs as vLLM's engine sends them
// (LogprobsTensors: a row per prompt token after the first, the prompt token then
// the top-k), deterministic: the prompt token at -1.0 with rank 2, alternatives
// drawn from the prefix's hash at -0.5, -1.5, ...
func promptLogprobs(prompt []int64, k int64) *wire.LogprobsTensors {
	var l logprobRows
	h := seqSeed
	for i, tok := range prompt {
		if i > 0 {
			l.ids = append(l.ids, int32(tok))
			l.lps = append(l.lps, -1)
			for j := range k {
				l.ids = append(l.ids, int32(tokenOf(seqHash(h, -int64(j)-1))))
				l.lps = append(l.lps, float32(-0.5-float64(j)))
			}
			l.ranks = append(l.ranks, 2)
		}
		h = seqHash(h, tok)
	}
	lists := l.lists(k)
	return &wire.LogprobsTensors{LogprobTokenIDs: lists.LogprobTokenIDs, Logprobs: lists.Logprobs, SelectedTokenRanks: lists.SampledTokenRanks}
}
