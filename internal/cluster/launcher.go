package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchyard-llm/switchyard/internal/coordinator"
	"github.com/switchyard-llm/switchyard/transport"
	"github.com/switchyard-llm/switchyard/wire"
)

// LauncherConfig configures the leader's duties: vLLM's multi-API-server
// launcher, which does the engines' handshake for every API server and runs
// the DP coordinator, while each API server only binds its own input and
// output.
type LauncherConfig struct {
	// HandshakeAddress is where engines send HELLO and READY
	// (--data-parallel-address/--data-parallel-rpc-port). Every frontend is
	// configured with the same one and only the leader binds it, so it must
	// be reachable wherever the leader runs: the same host, or a virtual IP
	// or DNS name that follows the leader.
	HandshakeAddress string
	// CoordinatorInput, CoordinatorOutput and CoordinatorPublish are the DP
	// coordinator's engine-facing XPUB and PULL and its front XPUB, stable
	// for the same reason (engines hold the first two from INIT). Used when
	// DataParallelSize > 1.
	CoordinatorInput, CoordinatorOutput, CoordinatorPublish string
	// DataParallelSize: ranks 0..N-1 may handshake.
	DataParallelSize int
	// Frontends is how many client indexes INIT must list: a HELLO is held
	// until the table has that many, because an engine's INIT is fixed for
	// its lifetime and a frontend missing from it would never get outputs.
	Frontends int
	// EnableWaves: MoE wave coordination in the coordinator.
	EnableWaves bool
	// Table reads the current client table.
	Table func(ctx context.Context) (Table, error)
	// OnReady is told each engine that completed the handshake (may be nil).
	OnReady func(rank int)
	// Network: nil = transport.ZMQ.
	Network transport.Network
	// Logger: nil discards.
	Logger *slog.Logger
}

// RunLauncher binds the handshake ROUTER (and the coordinator, with DP > 1),
// answers engines until ctx ends, then closes everything. Binding is retried
// until ctx ends: after a failover the previous leader may still hold the
// ports for a moment.
func RunLauncher(ctx context.Context, cfg LauncherConfig) error {
	if cfg.Network == nil {
		cfg.Network = transport.ZMQ
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "launcher")
	var node *coordinator.Node
	if cfg.DataParallelSize > 1 {
		ccfg := coordinator.DefaultConfig()
		ccfg.InputAddress, ccfg.OutputAddress, ccfg.PublishAddress = cfg.CoordinatorInput, cfg.CoordinatorOutput, cfg.CoordinatorPublish
		ccfg.Engines = cfg.DataParallelSize
		ccfg.EnableWaves = cfg.EnableWaves
		ccfg.Logger = log
		ccfg.Network = cfg.Network
		err := retry(ctx, log, "coordinator", func() error {
			n, err := coordinator.NewNode(ccfg, nil)
			if err != nil {
				return err
			}
			if err := n.Start(ctx); err != nil {
				n.Close()
				return err
			}
			node = n
			return nil
		})
		if err != nil {
			return err
		}
		defer node.Close()
	}
	var hs transport.Socket
	err := retry(ctx, log, "handshake", func() error {
		var err error
		hs, err = cfg.Network.Listen(ctx, transport.Router, cfg.HandshakeAddress, transport.Options{MaxFrameSize: 1 << 20, Logger: log})
		return err
	})
	if err != nil {
		return err
	}
	log.Info("owning the engine handshake", "handshake", hs.Addr(), "coordinator_publish", cfg.CoordinatorPublish)
	stop := context.AfterFunc(ctx, func() { hs.Close() })
	defer stop()
	defer hs.Close()
	for {
		frames, err := hs.Recv()
		if errors.Is(err, transport.ErrPeerLeft) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cluster: handshake socket: %w", err)
		}
		if len(frames) != 2 {
			continue
		}
		id, ok := wire.ParseIdentity(frames[0])
		if !ok {
			continue
		}
		st, err := wire.DecodeHandshakeStatus(frames[1])
		if err != nil {
			log.Warn("undecodable handshake message", "rank", id.Rank(), "err", err)
			continue
		}
		rank := id.Rank()
		if rank >= cfg.DataParallelSize {
			log.Error("refused handshake from a rank outside the data parallel size", "rank", rank, "data_parallel_size", cfg.DataParallelSize)
			continue
		}
		switch st.Status {
		case "HELLO":
			init, err := cfg.init(ctx, node, log)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				log.Error("cannot answer HELLO", "rank", rank, "err", err)
				continue
			}
			if err := hs.Send(id[:], wire.AppendInit(nil, &init)); err != nil {
				log.Warn("INIT not sent", "rank", rank, "err", err)
				continue
			}
			log.Info("engine handshake: INIT sent", "rank", rank, "inputs", init.Addresses.Inputs, "outputs", init.Addresses.Outputs)
		case "READY":
			log.Info("engine handshake: READY", "rank", rank)
			if cfg.OnReady != nil {
				cfg.OnReady(rank)
			}
		}
	}
}

// init builds INIT from the client table, waiting until it lists every
// frontend. Each engine connects a DEALER to every input and a PUSH to every
// output, and sends a request's outputs to outputs[client_index].
func (cfg LauncherConfig) init(ctx context.Context, node *coordinator.Node, log *slog.Logger) (wire.HandshakeInit, error) {
	var (
		tab     Table
		err     error
		waiting bool
	)
	for {
		tab, err = cfg.Table(ctx)
		if err == nil && len(tab) >= cfg.Frontends {
			break
		}
		if !waiting {
			log.Info("holding engine HELLOs until every frontend has joined", "joined", len(tab), "frontends", cfg.Frontends, "err", err)
			waiting = true
		}
		if ctx.Err() != nil {
			return wire.HandshakeInit{}, ctx.Err()
		}
		sleep(ctx, 200*time.Millisecond)
	}
	in, out, err := tab.Addresses()
	if err != nil {
		return wire.HandshakeInit{}, err
	}
	init := wire.HandshakeInit{Addresses: wire.EngineZmqAddresses{Inputs: in, Outputs: out}}
	if node != nil {
		init.Addresses.CoordinatorInput = wire.SomeString(node.InputAddress())
		init.Addresses.CoordinatorOutput = wire.SomeString(node.OutputAddress())
		init.Addresses.FrontendStatsPublishAddress = wire.SomeString(node.PublishAddress())
	}
	return init, nil
}

func retry(ctx context.Context, log *slog.Logger, what string, f func() error) error {
	logged := false
	for {
		err := f()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !logged {
			log.Warn("cannot bind yet (the previous leader may still hold it); retrying", "what", what, "err", err)
			logged = true
		}
		sleep(ctx, 100*time.Millisecond)
	}
}
