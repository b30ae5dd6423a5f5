package httpapi

// The access log: one line per HTTP request, as vLLM's API server logs one per
// request (on by default, off with --disable-log-requests). The completions handler
// fills in what only it knows (tokens, rank) through the request's context.

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// accessInfo is what a handler adds to its request's access-log line.
type accessInfo struct {
	id                             string
	rank                           int // -1: no engine served it
	promptTokens, completionTokens int
}

type accessKey struct{}

// accessOf is the request's access-log record, nil when the access log is off.
func accessOf(ctx context.Context) *accessInfo {
	ai, _ := ctx.Value(accessKey{}).(*accessInfo)
	return ai
}

// accessLog logs one line per request once its answer is complete (for a stream,
// when the stream ends).
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ai := &accessInfo{rank: -1}
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		defer func() {
			attrs := []slog.Attr{
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.Int("status", sw.code), slog.Duration("duration", time.Since(start)),
				slog.String("remote", r.RemoteAddr),
			}
			if ai.id != "" {
				attrs = append(attrs, slog.String("request_id", ai.id),
					slog.Int("prompt_tokens", ai.promptTokens), slog.Int("completion_tokens", ai.completionTokens))
			}
			if ai.rank >= 0 {
				attrs = append(attrs, slog.Int("rank", ai.rank))
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
		}()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), accessKey{}, ai)))
	})
}
