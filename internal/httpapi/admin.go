package httpapi

// Admin endpoints: POST /v1/engines/{rank}/drain and .../undrain. They change
// what every client gets, so they are guarded as the bootstrap registry's /v2
// admin API is (bootstrap.ParseAdminNetworks, FromNetworks, BearerMatches):
// only the admin networks (loopback by default) may call, a proxied request
// (forwarding headers) never counting as loopback, and with --admin-token only
// with "Authorization: Bearer TOKEN". The --api-key check does not apply to
// them (both would use the Authorization header), so --api-key requires
// --admin-token (Config.Validate).

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/switchyard-llm/switchyard/bootstrap"
	"github.com/switchyard-llm/switchyard/dispatcher"
)

// adminGuard decides who may call the admin endpoints.
type adminGuard struct {
	token string
	nets  []*net.IPNet // nil: nobody (the networks did not parse)
}

func newAdminGuard(token string, cidrs []string) (*adminGuard, error) {
	nets, err := bootstrap.ParseAdminNetworks("--admin-allow", cidrs, token)
	if err != nil {
		return &adminGuard{token: token}, err
	}
	return &adminGuard{token: token, nets: nets}, nil
}

func (g *adminGuard) wrap(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bootstrap.FromNetworks(r, g.nets) {
			writeError(w, &APIError{Status: http.StatusForbidden, Type: TypeForbidden,
				Message: "the admin endpoints answer only the networks in --admin-allow (loopback by default)"})
			return
		}
		if g.token != "" && !bootstrap.BearerMatches(r.Header.Get("Authorization"), g.token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="switchyard-admin"`)
			writeError(w, &APIError{Status: http.StatusUnauthorized, Type: TypeUnauthorized, Message: "Unauthorized"})
			return
		}
		h(w, r)
	})
}

// TypeForbidden is the error type of a call from outside the admin networks.
const TypeForbidden = "Forbidden"

// isAdminPath reports whether p (cleaned) is an admin endpoint, which the
// admin guard protects instead of the API keys.
func isAdminPath(p string) bool {
	c := path.Clean("/" + p)
	if loraPaths[c] {
		return true
	}
	rest, ok := strings.CutPrefix(c, "/v1/engines/")
	if !ok {
		return false
	}
	_, action, ok := strings.Cut(rest, "/")
	return ok && (action == "drain" || action == "undrain")
}

// drain serves POST /v1/engines/{rank}/drain (on) and .../undrain (off).
func (a *API) drain(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rank, err := strconv.Atoi(r.PathValue("rank"))
		if err != nil || rank < 0 {
			writeError(w, &APIError{Status: http.StatusBadRequest, Type: TypeBadRequest, Param: "rank",
				Message: fmt.Sprintf("rank %q: want a non-negative integer", r.PathValue("rank"))})
			return
		}
		migrate := false
		if m := r.URL.Query().Get("migrate"); on && m != "" && m != "false" && m != "0" {
			migrate = true
		}
		op := a.d.UndrainEngine
		if on {
			op = a.d.DrainEngine
		}
		if err := op(rank); err != nil {
			var unknown *dispatcher.UnknownRankError
			if errors.As(err, &unknown) {
				writeError(w, &APIError{Status: http.StatusNotFound, Type: TypeNotFound, Message: err.Error()})
				return
			}
			writeError(w, &APIError{Status: http.StatusInternalServerError, Type: TypeInternal, Message: err.Error()})
			return
		}
		// With migrate=true the rank's in-flight requests move to other ranks now
		// (after the drain, so none arrives behind them); those that cannot move
		// finish where they are.
		var moved, stayed int
		if migrate {
			moved, stayed, _ = a.d.MigrateEngine(rank)
		}
		a.log.Info("admin: engine drain changed", "rank", rank, "draining", on, "migrate", migrate,
			"moved", moved, "stayed", stayed, "remote", r.RemoteAddr)
		for _, v := range a.engines() {
			if v.Rank == rank {
				if migrate {
					writeJSON(w, http.StatusOK, struct {
						EngineView
						Moved  int `json:"moved"`
						Stayed int `json:"stayed"`
					}{v, moved, stayed})
					return
				}
				writeJSON(w, http.StatusOK, v)
				return
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"rank": rank, "draining": on, "moved": moved, "stayed": stayed})
	}
}
