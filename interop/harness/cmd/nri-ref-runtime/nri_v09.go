//go:build nri_v09

// nri-ref-runtime-old: the NRI v0.9.0 runtime adaptation (see nri_v012.go
// for what it lacks).

package main

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"

	"nri-rs.dev/interop/harness/internal/scenario"
)

// progName prefixes the program's error messages.
const progName = "nri-ref-runtime-old"

const (
	rawDefault = true
	rawUsage   = "accepted for compatibility; v0.9.0 has no Strip helpers, results are always raw"
)

// tracer: v0.9.0 has no tracing; a scenario's "trace" is ignored.
type tracer struct{}

func (rt *runner) setUpTracing() ([]ttrpc.UnaryClientInterceptor, func()) { return nil, func() {} }

func (rt *runner) startSpan(ctx context.Context, _ string) (context.Context, string, func()) {
	return ctx, "", func() {}
}

// notify delivers a notification event: v0.9.0 takes a StateChangeEvent for
// each and sends it to plugins as a StateChange RPC.
func (rt *runner) notify(ctx context.Context, op string, pod *api.PodSandbox, ctr *api.Container) error {
	send := map[string]func(context.Context, *api.StateChangeEvent) error{
		"RunPodSandbox":       rt.nri.RunPodSandbox,
		"StopPodSandbox":      rt.nri.StopPodSandbox,
		"RemovePodSandbox":    rt.nri.RemovePodSandbox,
		"PostCreateContainer": rt.nri.PostCreateContainer,
		"StartContainer":      rt.nri.StartContainer,
		"PostStartContainer":  rt.nri.PostStartContainer,
		"PostUpdateContainer": rt.nri.PostUpdateContainer,
		"RemoveContainer":     rt.nri.RemoveContainer,
	}[op]
	if send == nil {
		return fmt.Errorf("unknown notification %q", op)
	}
	return send(ctx, &api.StateChangeEvent{Pod: pod, Container: ctr})
}

// updatePodSandbox: UpdatePodSandbox and PostUpdatePodSandbox do not exist
// in v0.9.0.
func (rt *runner) updatePodSandbox(_ context.Context, st *scenario.Step) (interface{}, error) {
	return nil, fmt.Errorf("%s is not supported by NRI v0.9.0", st.Op)
}

// stripAdjustment and stripUpdates: results stay raw.
func stripAdjustment(a *api.ContainerAdjustment) *api.ContainerAdjustment { return a }

func stripUpdates(updates []*api.ContainerUpdate) []*api.ContainerUpdate { return updates }
