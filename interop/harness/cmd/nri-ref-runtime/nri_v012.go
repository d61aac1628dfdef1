//go:build !nri_v09

// What nri-ref-runtime has that nri-ref-runtime-old (NRI v0.9.0) lacks: a
// request type of its own for every event, the pod sandbox update events,
// stripping empty fields from results and OpenTelemetry tracing.

package main

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/otelttrpc"
	"github.com/containerd/ttrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"nri-rs.dev/interop/harness/internal/scenario"
)

// progName prefixes the program's error messages.
const progName = "nri-ref-runtime"

const (
	rawDefault = false
	rawUsage   = "do not strip empty fields from step results"
)

type tracer = trace.Tracer

// setUpTracing installs, for scenarios with "trace", a real SDK tracer
// provider (sampling every root span, exporting nowhere) and the W3C
// propagator, as containerd configures them: the client interceptors to put
// first, and the function that shuts the provider down.
func (rt *runner) setUpTracing() ([]ttrpc.UnaryClientInterceptor, func()) {
	if !rt.sc.Trace {
		return nil, func() {}
	}
	tp := sdktrace.NewTracerProvider()
	rt.tracer = tp.Tracer(progName)
	return []ttrpc.UnaryClientInterceptor{
		otelttrpc.UnaryClientInterceptor(
			otelttrpc.WithTracerProvider(tp),
			otelttrpc.WithPropagators(propagation.TraceContext{}),
		),
	}, func() { _ = tp.Shutdown(context.Background()) }
}

// startSpan starts the span of a step (with "trace"): its context, its
// trace id and the function that ends it.
func (rt *runner) startSpan(ctx context.Context, op string) (context.Context, string, func()) {
	if rt.tracer == nil {
		return ctx, "", func() {}
	}
	ctx, span := rt.tracer.Start(ctx, op)
	return ctx, span.SpanContext().TraceID().String(), func() { span.End() }
}

// notify delivers a notification event (no answer but an error).
func (rt *runner) notify(ctx context.Context, op string, pod *api.PodSandbox, ctr *api.Container) error {
	switch op {
	case "RunPodSandbox":
		return rt.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod})
	case "StopPodSandbox":
		return rt.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: pod})
	case "RemovePodSandbox":
		return rt.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: pod})
	case "PostCreateContainer":
		return rt.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: ctr})
	case "StartContainer":
		return rt.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr})
	case "PostStartContainer":
		return rt.nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: ctr})
	case "PostUpdateContainer":
		return rt.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: ctr})
	case "RemoveContainer":
		return rt.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr})
	}
	return fmt.Errorf("unknown notification %q", op)
}

// updatePodSandbox runs an UpdatePodSandbox or PostUpdatePodSandbox step.
func (rt *runner) updatePodSandbox(ctx context.Context, st *scenario.Step) (interface{}, error) {
	if st.Op == "PostUpdatePodSandbox" {
		return nil, rt.nri.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: rt.table.Pod(st.Pod)})
	}
	rpl, err := rt.nri.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{
		Pod:                    rt.table.Pod(st.Pod),
		OverheadLinuxResources: st.OverheadLinuxResources,
		LinuxResources:         st.LinuxResources,
	})
	if err != nil {
		return nil, err
	}
	return rpl, nil
}

func stripAdjustment(a *api.ContainerAdjustment) *api.ContainerAdjustment { return a.Strip() }

func stripUpdates(updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	var kept []*api.ContainerUpdate
	for _, u := range updates {
		if u = u.Strip(); u != nil {
			kept = append(kept, u)
		}
	}
	return kept
}
