package main

import (
	"github.com/urfave/cli/v3"

	"github.com/switchyard-llm/switchyard/bootstrap"
)

// registryFlags are the registry settings shared by `switchyard registry`
// (prefix "") and serve's embedded registry (prefix "bootstrap-"), so both
// are bounded and protected the same way. They are bound to cfg.
func registryFlags(prefix, envPrefix, category string, cfg *bootstrap.Config) []cli.Flag {
	def := bootstrap.DefaultConfig()
	env := func(name string) cli.ValueSourceChain { return cli.EnvVars(envPrefix + name) }
	return []cli.Flag{
		&cli.StringFlag{Name: prefix + "token", Destination: &cfg.Token, Category: category,
			Usage:   "bearer token required by the registry's mutating admin endpoints (DELETE, drain, undrain); /register stays open because vLLM cannot send one",
			Sources: env("TOKEN")},
		&cli.StringSliceFlag{Name: prefix + "admin-allow", Destination: &cfg.AdminNetworks, Category: category,
			Usage:   "CIDR or IP allowed to use the registry's /v2 admin API (repeatable); default loopback only; a non-loopback network requires the token",
			Sources: env("ADMIN_ALLOW")},
		&cli.IntFlag{Name: prefix + "max-engines", Destination: &cfg.MaxEngines, Category: category, Value: def.MaxEngines,
			Usage:   "engines (dp ranks) the registry holds; a registration beyond is refused with 400",
			Sources: env("MAX_ENGINES")},
		&cli.IntFlag{Name: prefix + "max-workers-per-engine", Destination: &cfg.MaxWorkersPerEngine, Category: category, Value: def.MaxWorkersPerEngine,
			Usage:   "bound on tp_size, pp_size, tp_size x pp_size, ranks and workers of one engine",
			Sources: env("MAX_WORKERS_PER_ENGINE")},
		&cli.IntFlag{Name: prefix + "max-workers", Destination: &cfg.MaxWorkers, Category: category, Value: def.MaxWorkers,
			Usage:   "workers held in all, current and retired (the oldest retired engines are forgotten first)",
			Sources: env("MAX_WORKERS")},
		&cli.IntFlag{Name: prefix + "max-response-bytes", Destination: &cfg.MaxResponseBytes, Category: category, Value: def.MaxResponseBytes,
			Usage:   "size of one /v2/engines page; the answer's next_offset says where the next page starts",
			Sources: env("MAX_RESPONSE_BYTES")},
	}
}
