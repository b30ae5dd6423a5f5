package clientapi

import (
	"context"
	"log/slog"
)

// logRequest is the client protocol's access-log line for one request: the
// client, its request id, how it ended (a finish reason, "abort", or the error
// type the client was sent), duration, tokens and rank.
func (s *ClientServer) logRequest(c *client, userID string, lr liveReq, status string) {
	if !s.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs,
		slog.String("client", c.idHex), slog.String("request_id", userID), slog.String("status", status),
		slog.Duration("duration", s.cfg.Now().Sub(lr.start)),
		slog.Int("prompt_tokens", lr.prompt), slog.Int("completion_tokens", lr.completion),
	)
	if lr.rank >= 0 {
		attrs = append(attrs, slog.Int("rank", lr.rank))
	}
	s.log.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
}
