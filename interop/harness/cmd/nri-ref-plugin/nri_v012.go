//go:build !nri_v09

// What nri-ref-plugin has that nri-ref-plugin-old (NRI v0.9.0) lacks: the
// pod sandbox update events, adjustment validation, the failure policy and
// OpenTelemetry tracing.

package main

import (
	"context"
	"errors"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/otelttrpc"
	"github.com/containerd/ttrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// progName prefixes the program's error messages.
const progName = "nri-ref-plugin"

// versionConfig holds the configuration keys of v0.12 only.
type versionConfig struct {
	// FailurePolicy is announced in the Configure response.
	FailurePolicy *api.FailurePolicy `json:"failure_policy,omitempty"`
	// Trace installs containerd's otelttrpc server interceptor (with an
	// OpenTelemetry SDK tracer): handlers run in a span continuing the
	// runtime's trace, and log entries carry its trace id.
	Trace bool `json:"trace,omitempty"`
}

type validateRequest = api.ValidateContainerAdjustmentRequest

// subject is the container an event is about (nil: none).
func (e *Entry) subject() *api.Container {
	if e.Container != nil {
		return e.Container
	}
	return e.Validate.GetContainer()
}

// versionOptions are the stub options only v0.12 has.
func versionOptions(cfg *Config) []stub.Option {
	if cfg.FailurePolicy != nil {
		return []stub.Option{stub.WithFailurePolicy(cfg.FailurePolicy)}
	}
	return nil
}

func runtimeNRIVersion(s stub.Stub) string { return s.RuntimeNRIVersion() }

// tracingInterceptors is containerd's otelttrpc server interceptor with an
// SDK tracer when the configuration asks for "trace", and the function that
// shuts the tracer down.
func (p *plugin) tracingInterceptors() ([]ttrpc.UnaryServerInterceptor, func()) {
	if !p.cfg.Trace {
		return nil, func() {}
	}
	tp := sdktrace.NewTracerProvider()
	return []ttrpc.UnaryServerInterceptor{
		otelttrpc.UnaryServerInterceptor(
			otelttrpc.WithTracerProvider(tp),
			otelttrpc.WithPropagators(propagation.TraceContext{}),
		),
	}, func() { _ = tp.Shutdown(context.Background()) }
}

// traceOf puts the trace of the handler's span into e (with "trace").
func (p *plugin) traceOf(ctx context.Context, e *Entry) {
	if !p.cfg.Trace {
		return
	}
	// The span otelttrpc's server interceptor started for this request.
	if span, ok := trace.SpanFromContext(ctx).(sdktrace.ReadOnlySpan); ok {
		e.TraceID = span.SpanContext().TraceID().String()
		if parent := span.Parent(); parent.IsValid() {
			e.ParentSpanID = parent.SpanID().String()
		}
	}
}

func (p *plugin) UpdatePodSandbox(ctx context.Context, pod *api.PodSandbox, overhead, res *api.LinuxResources) error {
	return p.enter(ctx, &Entry{Event: "UpdatePodSandbox", Pod: pod, Overhead: overhead, Resources: res})
}

func (p *plugin) PostUpdatePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return p.enter(ctx, &Entry{Event: "PostUpdatePodSandbox", Pod: pod})
}

func (p *plugin) ValidateContainerAdjustment(ctx context.Context, req *api.ValidateContainerAdjustmentRequest) error {
	if err := p.enter(ctx, &Entry{Event: "ValidateContainerAdjustment", Validate: req}); err != nil {
		return err
	}
	if reject, reason := p.cfg.rejection(req.GetContainer()); reject {
		return errors.New(reason)
	}
	return nil
}
