package clientapi

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchyard-llm/switchyard/internal/apicore"
	"github.com/switchyard-llm/switchyard/wire"
)

// startSpan starts a client-protocol request's span, a child of the trace context
// the client put in trace_headers (if any), and replaces that context in the
// request with the span's, keeping the client's other headers. nil: tracing off.
func (s *ClientServer) startSpan(req *wire.EngineCoreRequest, userID string) *apicore.Span {
	if s.tracer == nil {
		return nil
	}
	ctx := apicore.Propagator.Extract(context.Background(), propagation.MapCarrier(req.TraceHeaders))
	ctx, span := s.tracer.Start(ctx, "llm_request", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("gen_ai.request.id", userID), attribute.String("switchyard.protocol", "msgpack")))
	h := make(map[string]string, len(req.TraceHeaders)+2)
	for k, v := range req.TraceHeaders {
		h[k] = v
	}
	apicore.Propagator.Inject(ctx, propagation.MapCarrier(h))
	req.TraceHeaders = h
	rs := apicore.NewSpan(span)
	rs.Request([]*wire.EngineCoreRequest{req})
	return rs
}
