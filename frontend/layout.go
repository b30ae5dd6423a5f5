package frontend

// Placing each engine on its vLLM wire layout, between the handshake and EngineUp:
// from what the handshake shows (wire.LayoutSet.Place) and, when several releases
// look alike there, UTILITY probes (wire.Prober), which are the only messages an
// engine is sent before it is placed. The first output message with entries then
// confirms the placement (wire.OutputsDecoder.CheckLayout) before anything reaches a
// client.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard-llm/switchyard/wire"
)

// probeCallBase marks the call ids of layout probes: far above the dispatcher's ids
// (which count up from 1), so a probe reply is never taken for a client's call.
const probeCallBase = uint64(1) << 62

// place runs on the control loop once READY and the registration are in: it places
// e, starts probing it, or refuses it.
func (f *Frontend) place(e *engine) {
	h := e.hs
	p := f.cfg.Layouts.Place(&h.reg, h.readyMsg)
	switch {
	case p.Layout != nil:
		f.logExtraKeys(e, p)
		f.placed(e, p.Layout, p.How, p.Version)
	case p.Refused != "":
		f.refuseLayout(e, p.Version, p.Refused)
	default:
		h.prober = wire.NewProber(p.Candidates)
		f.log.Info("frontend: probing engine for its vLLM release", "rank", e.rank, "generation", e.gen, "candidates", layoutNames(p.Candidates))
		f.nextProbe(e)
	}
}

func layoutNames(ls []*wire.Layout) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Name
	}
	return out
}

// nextProbe sends the prober's next question, or settles the layout.
func (f *Frontend) nextProbe(e *engine) {
	h := e.hs
	m, ok := h.prober.Next()
	if !ok {
		l, how := h.prober.Result()
		h.prober = nil
		if l == nil {
			f.refuseLayout(e, "", f.cfg.Layouts.Refusal(how))
			return
		}
		f.placed(e, l, how, "")
		return
	}
	h.probeCall++
	id := probeCallBase + h.probeCall
	body, err := wire.AppendUtility(nil, f.cfg.ClientIndex, id, m, wire.ProbeArgsRaw)
	if err == nil {
		err = e.enqueueProbe(body)
	}
	if err != nil {
		f.markDown(e, Dead, &HandshakeError{Rank: e.rank, Phase: PhaseLayout, Msg: "sending a probe", Err: err})
		return
	}
	h.probeMethod = m
}

// onProbeReply: the engine answered a probe (control loop).
func (f *Frontend) onProbeReply(e *engine, u *wire.UtilityOutput) {
	h := e.hs
	if e.state() != Connecting || h.prober == nil || u.CallID != probeCallBase+h.probeCall {
		return // a stale answer: the generation moved on
	}
	h.prober.Answer(h.probeMethod, wire.ProbeAnswer(h.probeMethod, u))
	f.nextProbe(e)
}

func (f *Frontend) placed(e *engine, l *wire.Layout, how, version string) {
	e.hs.layout = l
	e.layout.Store(l)
	info := *e.info.Load()
	info.Layout, info.LayoutHow, info.VLLMVersion = l, how, version
	e.info.Store(&info)
	f.metrics.placed(e.rank, l, version)
	f.log.Info("frontend: engine wire layout", "rank", e.rank, "generation", e.gen, "layout", l.String(),
		"vllm_version", version, "how", how)
	f.maybeUp(e)
}

// logExtraKeys warns once per rank (again only when the keys change) that its
// engine registers keys its layout does not list: a restarting engine rejoins with
// the same keys, and one line says all there is to say.
func (f *Frontend) logExtraKeys(e *engine, p wire.Placement) {
	if len(p.ExtraKeys) == 0 {
		return
	}
	keys := strings.Join(p.ExtraKeys, " ")
	if f.extraLogged == nil {
		f.extraLogged = map[int]string{}
	}
	if f.extraLogged[e.rank] == keys {
		return
	}
	f.extraLogged[e.rank] = keys
	f.log.Warn("frontend: engine registers keys its vLLM layout does not list; placed since switchyard reads them all", "rank", e.rank,
		"generation", e.gen, "layout", p.Layout.String(), "vllm_version", p.Version, "extra_keys", p.ExtraKeys)
}

func (f *Frontend) refuseLayout(e *engine, version, msg string) {
	info := *e.info.Load()
	info.VLLMVersion = version
	e.info.Store(&info)
	f.metrics.layoutRefused.Inc()
	f.log.Error("frontend: engine refused: its vLLM wire layout cannot be placed; it was sent nothing", "rank", e.rank,
		"generation", e.gen, "vllm_version", version, "reason", msg)
	err := &LayoutRefusedError{Rank: e.rank, Version: version, Msg: msg}
	f.markDown(e, Dead, err)
	if rh, ok := f.h.(RefusalHandler); ok && !e.wasUp {
		rh.EngineRefused(e.rank, err)
	}
}

// onOutputs handles one decoded message of e: probe replies go to the control loop;
// the first message with entries must fit the layout exactly; the rest is delivered.
// A non-nil error means e must go down.
func (e *engine) onOutputs(dec *wire.OutputsDecoder, outs *wire.EngineCoreOutputs) error {
	if u := outs.UtilityOutput; u != nil && u.CallID > probeCallBase && !u.CallIDNegative {
		reply := *u
		e.f.post(event{kind: evProbeReply, e: e, utility: &reply})
		return nil
	}
	if !e.confirmed.Load() && len(outs.Outputs) > 0 {
		if err := dec.CheckLayout(); err != nil {
			return e.mismatch(err)
		}
		e.confirmed.Store(true)
	}
	e.deliver(outs)
	return nil
}

// mismatch words a decode or layout error of e's first outputs as a wrong placement.
func (e *engine) mismatch(err error) error {
	info := e.info.Load()
	name := "?"
	if info.Layout != nil {
		name = info.Layout.String()
	}
	var lm *wire.LayoutMismatchError
	if !errors.As(err, &lm) {
		err = &wire.LayoutMismatchError{Layout: name, Msg: err.Error()}
	}
	return fmt.Errorf("frontend: engine rank %d, placed by %s: %w", e.rank, info.LayoutHow, err)
}

// decodeError is what e's undecodable output means: before its first confirmed
// output, a wrong placement; after, garbage.
func (e *engine) decodeError(err error) error {
	if !e.confirmed.Load() {
		return e.mismatch(err)
	}
	return fmt.Errorf("frontend: undecodable output: %w", err)
}
