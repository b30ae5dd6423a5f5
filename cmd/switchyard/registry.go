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
	def := bootstrap.DefaultConfig()
	return &cli.Command{
		Name:  "registry",
		Usage: "run the KV-transfer bootstrap registry alone (vLLM Mooncake connector compatible)",
		Description: "Point vLLM's Mooncake connector at it with\n" +
			"  --kv-transfer-config '{..., \"kv_connector_extra_config\": {\"bootstrap_server_address\": \"HOST:PORT\"}}'.\n" +
			"Serves POST /register, GET /query (vLLM's API), the /v2 admin API and /metrics.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "address", Value: def.Address,
				Usage:   "HOST:PORT to listen on (vLLM's default bootstrap port is 8998)",
				Sources: cli.EnvVars("SWITCHYARD_REGISTRY_ADDRESS")},
			&cli.StringFlag{Name: "snapshot",
				Usage: "JSON file the registry is saved to and loaded from at start, so a restart keeps entries vLLM will not re-register; " +
					"each change is appended (and fsynced) to FILE.log, folded into FILE once the log outgrows it",
				Sources: cli.EnvVars("SWITCHYARD_REGISTRY_SNAPSHOT")},
			&cli.StringSliceFlag{Name: "etcd-endpoints",
				Usage:   "keep the registry in etcd instead of --snapshot, shared by every registry (and every serve) with the same endpoints and --etcd-prefix",
				Sources: cli.EnvVars("SWITCHYARD_ETCD_ENDPOINTS")},
			&cli.StringFlag{Name: "etcd-prefix", Value: cluster.DefaultPrefix,
				Usage:   "key prefix of the deployment in etcd; the registry lives under PREFIX/registry/",
				Sources: cli.EnvVars("SWITCHYARD_ETCD_PREFIX")},
		}, registryFlags("", "SWITCHYARD_REGISTRY_", "")...),
		Action: runRegistry,
	}
}

func runRegistry(ctx context.Context, cmd *cli.Command) error {
	log := newLogger(cmd, os.Stderr)
	reg := newRegistry()
	cfg := bootstrap.DefaultConfig()
	cfg.Address = cmd.String("address")
	applyRegistryFlags(cmd, "", &cfg)
	cfg.SnapshotPath = cmd.String("snapshot")
	cfg.Logger = log
	cfg.Registerer = reg
	if eps := cmd.StringSlice("etcd-endpoints"); len(eps) > 0 {
		cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			return fmt.Errorf("--etcd-endpoints: %w", err)
		}
		defer cli.Close()
		cfg.Store = bootstrap.NewEtcdStore(cli, registryPrefix(cmd.String("etcd-prefix")))
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
