package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/urfave/cli/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchyard-llm/switchyard/bootstrap"
	"github.com/switchyard-llm/switchyard/internal/cluster"
)

// registryCommand is `switchyard registry`: the KV-transfer bootstrap registry alone,
// for deployments that run it apart from the frontend.
func registryCommand() *cli.Command {
	cfg, def := bootstrap.DefaultConfig(), bootstrap.DefaultConfig()
	var etcd registryEtcd
	return &cli.Command{
		Name:  "registry",
		Usage: "run the KV-transfer bootstrap registry alone (vLLM Mooncake connector compatible)",
		Description: "Point vLLM's Mooncake connector at it with\n" +
			"  --kv-transfer-config '{..., \"kv_connector_extra_config\": {\"bootstrap_server_address\": \"HOST:PORT\"}}'.\n" +
			"Serves POST /register, GET /query (vLLM's API), the /v2 admin API and /metrics.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "address", Destination: &cfg.Address, Value: def.Address,
				Usage:   "HOST:PORT to listen on (vLLM's default bootstrap port is 8998)",
				Sources: cli.EnvVars("SWITCHYARD_REGISTRY_ADDRESS")},
			&cli.StringFlag{Name: "snapshot", Destination: &cfg.SnapshotPath,
				Usage: "JSON file the registry is saved to and loaded from at start, so a restart keeps entries vLLM will not re-register; " +
					"each change is appended (and fsynced) to FILE.log, folded into FILE once the log outgrows it",
				Sources: cli.EnvVars("SWITCHYARD_REGISTRY_SNAPSHOT")},
			&cli.StringSliceFlag{Name: "etcd-endpoints", Destination: &etcd.endpoints,
				Usage:   "keep the registry in etcd instead of --snapshot, shared by every registry (and every serve) with the same endpoints and --etcd-prefix",
				Sources: cli.EnvVars("SWITCHYARD_ETCD_ENDPOINTS")},
			&cli.StringFlag{Name: "etcd-prefix", Destination: &etcd.prefix, Value: cluster.DefaultPrefix,
				Usage:   "key prefix of the deployment in etcd; the registry lives under PREFIX/registry/",
				Sources: cli.EnvVars("SWITCHYARD_ETCD_PREFIX")},
		}, registryFlags("", "SWITCHYARD_REGISTRY_", "", &cfg)...),
		Action: func(ctx context.Context, cmd *cli.Command) error { return runRegistry(ctx, cmd, cfg, etcd) },
	}
}

// registryEtcd is where `switchyard registry --etcd-endpoints` keeps the registry.
type registryEtcd struct {
	endpoints []string
	prefix    string
}

func runRegistry(ctx context.Context, cmd *cli.Command, cfg bootstrap.Config, etcd registryEtcd) error {
	log := newLogger(cmd, os.Stderr)
	cfg.Logger = log
	cfg.Registerer = newRegistry()
	if eps := etcd.endpoints; len(eps) > 0 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return fmt.Errorf("--etcd-endpoints: %w", err)
		}
		defer cli.Close()
		cfg.Store = bootstrap.NewEtcdStore(cli, registryPrefix(etcd.prefix))
	}
	srv, err := bootstrap.NewServer(cfg)
	if err != nil {
		return err
	}
	// Serve returns nil after ctx (SIGTERM/SIGINT) ends and it has shut down.
	if err := srv.Serve(ctx); err != nil && err != http.ErrServerClosed {
		return err
	}
	log.Info("stopped")
	return nil
}
