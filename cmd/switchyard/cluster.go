package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchyard-llm/switchyard/bootstrap"
	"github.com/switchyard-llm/switchyard/internal/cluster"
	"github.com/switchyard-llm/switchyard/internal/server"
)

// clusterOptions are serve's scale-out flags: several frontends over one
// engine fleet, coordinated through etcd.
type clusterOptions struct {
	endpoints                     []string
	prefix, name                  string
	frontends, leaseTTL           int
	coordinatorIn, coordinatorOut string
}

// flags binds the scale-out flags to o.
func (o *clusterOptions) flags() []cli.Flag {
	const cat = "scale-out (several frontends, etcd)"
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "etcd-endpoints", Destination: &o.endpoints, Category: cat,
			Usage:   "etcd client URLs (repeatable or comma-separated); set, this frontend is one of several: --handshake-address is bound only by the elected leader, --input-address/--output-address are this frontend's own, the registry lives in etcd",
			Sources: cli.EnvVars("SWITCHYARD_ETCD_ENDPOINTS")},
		&cli.StringFlag{Name: "etcd-prefix", Destination: &o.prefix, Category: cat, Value: cluster.DefaultPrefix,
			Usage:   "key prefix of this deployment in etcd",
			Sources: cli.EnvVars("SWITCHYARD_ETCD_PREFIX")},
		&cli.StringFlag{Name: "frontend-name", Destination: &o.name, Category: cat,
			Usage:   "this frontend's stable name; its client index is bound to it (default: host name)",
			Sources: cli.EnvVars("SWITCHYARD_FRONTEND_NAME")},
		&cli.IntFlag{Name: "frontends", Destination: &o.frontends, Category: cat, Value: 1,
			Usage:   "how many frontends every engine's INIT lists (vLLM's --api-server-count): engine HELLOs wait until that many have joined",
			Sources: cli.EnvVars("SWITCHYARD_FRONTENDS")},
		&cli.IntFlag{Name: "etcd-lease-ttl", Destination: &o.leaseTTL, Category: cat, Value: cluster.DefaultTTL,
			Usage:   "seconds: a frontend that stops renewing is gone, and loses the leadership, this long after",
			Sources: cli.EnvVars("SWITCHYARD_ETCD_LEASE_TTL")},
		&cli.StringFlag{Name: "coordinator-input-address", Destination: &o.coordinatorIn, Category: cat,
			Usage:   "tcp://HOST:PORT of the DP coordinator's engine-facing XPUB, bound by the leader (the same on every frontend)",
			Sources: cli.EnvVars("SWITCHYARD_COORDINATOR_INPUT_ADDRESS")},
		&cli.StringFlag{Name: "coordinator-output-address", Destination: &o.coordinatorOut, Category: cat,
			Usage:   "tcp://HOST:PORT of the DP coordinator's engine-facing PULL, bound by the leader (the same on every frontend)",
			Sources: cli.EnvVars("SWITCHYARD_COORDINATOR_OUTPUT_ADDRESS")},
	}
}

// scaleOut is a running cluster membership.
type scaleOut struct {
	cli      *clientv3.Client
	member   *cluster.Member
	follower *cluster.Follower
	launch   cluster.LauncherConfig
	cancel   context.CancelFunc
	done     chan struct{}
}

// setupCluster joins the deployment when --etcd-endpoints is set and turns
// cfg into one client of several: bootstrapped on its own input and output,
// following the leader's coordinator, its registry in etcd. nil without
// --etcd-endpoints: everything behaves as before.
func setupCluster(ctx context.Context, o *clusterOptions, cfg *server.Config, log *slog.Logger) (*scaleOut, error) {
	eps := o.endpoints
	if len(eps) == 0 {
		return nil, nil
	}
	switch {
	case o.frontends < 1:
		return nil, errors.New("--frontends must be at least 1")
	case o.leaseTTL < 1:
		return nil, errors.New("--etcd-lease-ttl must be at least 1 (seconds)")
	case cfg.HandshakeAddress == "":
		return nil, errors.New("--etcd-endpoints needs --handshake-address: the engines' handshake address, bound by whichever frontend leads")
	case cfg.InputAddress == "" || cfg.OutputAddress == "":
		return nil, errors.New("--etcd-endpoints needs --input-address and --output-address: this frontend's own, listed in every engine's INIT at its client index")
	case cfg.ExternalCoordinatorAddress != "":
		return nil, errors.New("--etcd-endpoints runs its own coordinator on the leader: drop --external-coordinator-address")
	case cfg.StartRank != 0 || (cfg.LocalRanks != 0 && cfg.LocalRanks != cfg.DataParallelSize):
		return nil, errors.New("--etcd-endpoints: every frontend serves every rank; drop --data-parallel-start-rank/--data-parallel-size-local")
	}
	ranks := cfg.DataParallelSize
	coIn, coOut, coPub := o.coordinatorIn, o.coordinatorOut, cfg.CoordinatorPublishAddress
	if ranks > 1 && (coIn == "" || coOut == "" || coPub == "") {
		return nil, errors.New("--etcd-endpoints with --data-parallel-size > 1 needs --coordinator-input-address, --coordinator-output-address and --coordinator-publish-address: the leader's coordinator binds them, and they must stay the same when another frontend takes over")
	}
	name := o.name
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--frontend-name: %w", err)
		}
		name = h
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("--etcd-endpoints: %w", err)
	}
	prefix := o.prefix
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	member, err := cluster.Join(jctx, cluster.Config{
		Client: cli, Prefix: prefix, Name: name,
		Input: cfg.InputAddress, Output: cfg.OutputAddress, HTTP: cfg.HTTPAddress,
		TTL: o.leaseTTL, Logger: log,
	})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("--etcd-endpoints: %w", err)
	}
	so := &scaleOut{cli: cli, member: member, done: make(chan struct{})}
	so.launch = cluster.LauncherConfig{
		HandshakeAddress: cfg.HandshakeAddress,
		CoordinatorInput: coIn, CoordinatorOutput: coOut, CoordinatorPublish: coPub,
		DataParallelSize: ranks,
		Frontends:        o.frontends,
		EnableWaves:      cfg.EnableWaves,
		Table:            member.Table,
		Logger:           log,
	}
	so.launch.OnReady = func(rank int) {
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rec, err := member.RecordEngineReady(rctx, rank)
		if err != nil {
			log.Warn("scale-out: engine record not written to etcd", "rank", rank, "err", err)
			return
		}
		log.Info("scale-out: engine joined the deployment", "rank", rank, "generation", rec.Generation)
	}
	// The server is one client of several: it binds its own input and
	// output (bootstrapped mode) and never the handshake or the coordinator.
	cfg.HandshakeAddress = ""
	cfg.CoordinatorPublishAddress = ""
	cfg.ClientIndex = int64(member.Client().Index)
	cfg.AbortOrphans = true
	cfg.EngineRegistrations = member.Registrations()
	if ranks > 1 {
		so.follower = cluster.NewFollower(coPub, cfg.EnableWaves, nil, log)
		cfg.FollowCoordinator = so.follower
	}
	if cfg.BootstrapAddress != "" {
		cfg.Bootstrap.Store = bootstrap.NewEtcdStore(cli, registryPrefix(prefix))
	}
	log.Info("scale-out: joined the deployment", "frontend", name, "client_index", cfg.ClientIndex, "etcd", eps, "frontends", so.launch.Frontends)
	return so, nil
}

// run campaigns for the leadership (the leader runs the handshake and the
// coordinator) and reconnects the coordinator follower on every change of
// leader, until stop.
func (so *scaleOut) run(srv *server.Server) {
	if so == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	so.cancel = cancel
	var wg sync.WaitGroup
	// Every frontend's view of the engines, and deployment-wide drains.
	wg.Go(func() { so.member.PublishView(ctx, time.Second, func() any { return srv.Engines() }) })
	wg.Go(func() { so.member.FollowDrains(ctx, time.Second, srv.Dispatcher()) })
	wg.Go(func() {
		so.member.ObserveLeader(ctx, func(leader cluster.MemberInfo, ok bool) {
			if ok && so.follower != nil {
				so.follower.Reconnect()
			}
		})
	})
	wg.Go(func() {
		so.member.Lead(ctx, func(lctx context.Context) {
			if err := cluster.RunLauncher(lctx, so.launch); err != nil && lctx.Err() == nil {
				so.launch.Logger.Error("scale-out: launcher stopped", "err", err)
			}
		})
	})
	go func() {
		wg.Wait()
		close(so.done)
	}()
}

// stop steps down (the next leader is elected at once) and leaves.
func (so *scaleOut) stop() {
	if so == nil {
		return
	}
	if so.cancel != nil {
		so.cancel()
		<-so.done
	}
	so.member.Close()
	so.cli.Close()
}

// registryPrefix is where a deployment's registry lives in etcd, the same for
// serve and a standalone registry given the same --etcd-prefix.
func registryPrefix(prefix string) string {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix + "registry/"
}
