// Command nri-ref-runtime runs the official NRI runtime adaptation
// (github.com/containerd/nri/pkg/adaptation) and replays a scenario of pod
// and container lifecycle events against the connected plugins. It prints
// one JSON document with the result of every step. See interop/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/otelttrpc"
	"github.com/containerd/ttrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"nri-rs.dev/interop/harness-shared/scenario"
)

func main() {
	var (
		scenarioPath = flag.String("scenario", "", "scenario file (JSON)")
		socketPath   = flag.String("socket", "", "socket for external plugins (empty: external plugins disabled)")
		pluginDir    = flag.String("plugin-dir", "", "directory of pre-installed plugins (empty: none)")
		configDir    = flag.String("plugin-config-dir", "", "drop-in directory of plugin configuration (empty: none)")
		outputPath   = flag.String("output", "", "output file (default stdout)")
		raw          = flag.Bool("raw", false, "do not strip empty fields from step results")
	)
	flag.Parse()

	if *scenarioPath == "" {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime: -scenario is required")
		os.Exit(2)
	}
	sc, err := scenario.Load(*scenarioPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime:", err)
		os.Exit(2)
	}

	out := run(sc, *socketPath, *pluginDir, *configDir, !*raw)
	if err := scenario.WriteOutput(out, *outputPath); err != nil {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime: write output:", err)
		os.Exit(1)
	}
	if out.Error != "" {
		os.Exit(1)
	}
}

type runner struct {
	sc    *scenario.Scenario
	table *scenario.Table
	rec   *scenario.Recorder
	fail  map[string]bool
	nri   *adaptation.Adaptation
	strip bool
	// tracer starts the span of each step (scenarios with "trace").
	tracer trace.Tracer
}

func run(sc *scenario.Scenario, socketPath, pluginDir, configDir string, strip bool) *scenario.Output {
	out := &scenario.Output{Steps: []scenario.StepResult{}}
	rt := &runner{
		sc:    sc,
		table: scenario.NewTable(sc),
		rec:   scenario.NewRecorder(),
		fail:  map[string]bool{},
		strip: strip,
	}
	for _, id := range sc.FailUpdates {
		rt.fail[id] = true
	}

	if sc.RegistrationTimeoutMs > 0 {
		adaptation.SetPluginRegistrationTimeout(time.Duration(sc.RegistrationTimeoutMs) * time.Millisecond)
	}
	if sc.RequestTimeoutMs > 0 {
		adaptation.SetPluginRequestTimeout(time.Duration(sc.RequestTimeoutMs) * time.Millisecond)
	}

	cleanup, opts, err := options(socketPath, pluginDir, configDir)
	defer cleanup()
	if err != nil {
		out.Error = err.Error()
		return out
	}
	clientInterceptors := []ttrpc.UnaryClientInterceptor{rt.rec.ClientInterceptor}
	if sc.Trace {
		// A real SDK tracer provider (sampling every root span, exporting
		// nowhere) and the W3C propagator, as containerd configures them.
		tp := sdktrace.NewTracerProvider()
		defer tp.Shutdown(context.Background())
		rt.tracer = tp.Tracer("nri-ref-runtime")
		clientInterceptors = append([]ttrpc.UnaryClientInterceptor{
			otelttrpc.UnaryClientInterceptor(
				otelttrpc.WithTracerProvider(tp),
				otelttrpc.WithPropagators(propagation.TraceContext{}),
			),
		}, clientInterceptors...)
	}
	opts = append(opts, adaptation.WithTTRPCOptions(
		[]ttrpc.ClientOpts{ttrpc.WithChainUnaryClientInterceptor(clientInterceptors...)},
		[]ttrpc.ServerOpt{ttrpc.WithUnaryServerInterceptor(rt.rec.ServerInterceptor)},
	))

	rt.nri, err = adaptation.New(sc.Runtime.Name, sc.Runtime.Version, rt.syncFn, rt.updateFn, opts...)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	if err := rt.nri.Start(); err != nil {
		out.Error = "start: " + err.Error()
		rt.rec.Fill(out)
		return out
	}

	stopped := false
	for i := range sc.Steps {
		st := &sc.Steps[i]
		if st.Op == "stop" {
			stopped = true
		}
		out.Steps = append(out.Steps, rt.step(st))
	}
	if !stopped {
		rt.nri.Stop()
	}
	rt.rec.Fill(out)
	return out
}

func options(socketPath, pluginDir, configDir string) (func(), []adaptation.Option, error) {
	var (
		opts []adaptation.Option
		tmp  string
	)
	cleanup := func() {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}
	if pluginDir == "" || configDir == "" {
		dir, err := os.MkdirTemp("", "nri-ref-runtime-")
		if err != nil {
			return cleanup, nil, err
		}
		tmp = dir
		if pluginDir == "" {
			pluginDir = dir
		}
		if configDir == "" {
			configDir = dir
		}
	}
	opts = append(opts,
		adaptation.WithPluginPath(pluginDir),
		adaptation.WithPluginConfigPath(configDir),
	)
	if socketPath == "" {
		opts = append(opts, adaptation.WithDisabledExternalConnections())
	} else {
		opts = append(opts, adaptation.WithSocketPath(socketPath))
	}
	return cleanup, opts, nil
}

func (rt *runner) syncFn(ctx context.Context, cb adaptation.SyncCB) error {
	pods, ctrs := rt.table.Snapshot()
	updates, err := cb(ctx, pods, ctrs)
	rec := scenario.SyncRecord{
		Pods:       len(pods),
		Containers: len(ctrs),
		Updates:    nonNil(updates),
		Failed:     []*api.ContainerUpdate{},
		Error:      scenario.ErrString(err),
	}
	if err == nil {
		rec.Failed = rt.table.ApplyUpdates(updates, rt.fail)
	}
	rt.rec.AddSync(rec)
	return err
}

func (rt *runner) updateFn(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	failed := rt.table.ApplyUpdates(updates, rt.fail)
	rt.rec.AddUpdateCall(scenario.UpdateCall{Updates: nonNil(updates), Failed: failed})
	return failed, nil
}

func nonNil(u []*api.ContainerUpdate) []*api.ContainerUpdate {
	if u == nil {
		return []*api.ContainerUpdate{}
	}
	return u
}

func (rt *runner) step(st *scenario.Step) scenario.StepResult {
	res := scenario.StepResult{Op: st.Op, Pod: st.Pod, Container: st.Container}
	ctx := context.Background()
	if rt.tracer != nil {
		var span trace.Span
		ctx, span = rt.tracer.Start(ctx, st.Op)
		defer span.End()
		res.TraceID = span.SpanContext().TraceID().String()
	}
	result, err := rt.exec(ctx, st)
	res.Result = result
	res.Error = scenario.ErrString(err)
	return res
}

func (rt *runner) exec(ctx context.Context, st *scenario.Step) (interface{}, error) {
	switch st.Op {
	case "wait_plugins":
		return rt.rec.WaitPlugins(st.Count, ms(st.Timeout(10000)), func() {
			rt.nri.BlockPluginSync().Unblock()
		})
	case "wait_updates":
		return rt.rec.WaitUpdates(st.Count, ms(st.Timeout(5000)))
	case "sleep":
		time.Sleep(ms(st.Ms))
		return nil, nil
	case "stop":
		rt.nri.Stop()
		return nil, nil

	case "RunPodSandbox":
		pod := rt.table.Pod(st.Pod)
		err := rt.nri.RunPodSandbox(ctx, &api.RunPodSandboxRequest{Pod: pod})
		if err == nil {
			rt.table.AddPod(pod)
		}
		return nil, err
	case "UpdatePodSandbox":
		rpl, err := rt.nri.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{
			Pod:                    rt.table.Pod(st.Pod),
			OverheadLinuxResources: st.OverheadLinuxResources,
			LinuxResources:         st.LinuxResources,
		})
		return result(rpl, err)
	case "PostUpdatePodSandbox":
		return nil, rt.nri.PostUpdatePodSandbox(ctx, &api.PostUpdatePodSandboxRequest{Pod: rt.table.Pod(st.Pod)})
	case "StopPodSandbox":
		return nil, rt.nri.StopPodSandbox(ctx, &api.StopPodSandboxRequest{Pod: rt.table.Pod(st.Pod)})
	case "RemovePodSandbox":
		err := rt.nri.RemovePodSandbox(ctx, &api.RemovePodSandboxRequest{Pod: rt.table.Pod(st.Pod)})
		rt.table.RemovePod(st.Pod)
		return nil, err

	case "CreateContainer":
		pod, ctr := rt.container(st)
		rpl, err := rt.nri.CreateContainer(ctx, &api.CreateContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			return nil, err
		}
		ctr.State = api.ContainerState_CONTAINER_CREATED
		rt.table.AddContainer(ctr)
		rt.table.ApplyUpdates(rpl.Update, rt.fail)
		if rt.strip {
			rpl.Adjust = rpl.Adjust.Strip()
			rpl.Update = stripUpdates(rpl.Update)
		}
		return rpl, nil
	case "PostCreateContainer":
		pod, ctr := rt.container(st)
		return nil, rt.nri.PostCreateContainer(ctx, &api.PostCreateContainerRequest{Pod: pod, Container: ctr})
	case "StartContainer":
		pod, ctr := rt.container(st)
		err := rt.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr})
		if err == nil {
			rt.table.SetState(ctr.Id, api.ContainerState_CONTAINER_RUNNING)
		}
		return nil, err
	case "PostStartContainer":
		pod, ctr := rt.container(st)
		return nil, rt.nri.PostStartContainer(ctx, &api.PostStartContainerRequest{Pod: pod, Container: ctr})
	case "UpdateContainer":
		pod, ctr := rt.container(st)
		rpl, err := rt.nri.UpdateContainer(ctx, &api.UpdateContainerRequest{
			Pod: pod, Container: ctr, LinuxResources: st.LinuxResources,
		})
		if err != nil {
			return nil, err
		}
		rt.table.SetResources(ctr.Id, st.LinuxResources)
		rt.table.ApplyUpdates(rpl.Update, rt.fail)
		if rt.strip {
			rpl.Update = stripUpdates(rpl.Update)
		}
		return rpl, nil
	case "PostUpdateContainer":
		pod, ctr := rt.container(st)
		return nil, rt.nri.PostUpdateContainer(ctx, &api.PostUpdateContainerRequest{Pod: pod, Container: ctr})
	case "StopContainer":
		pod, ctr := rt.container(st)
		rpl, err := rt.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			return nil, err
		}
		rt.table.SetState(ctr.Id, api.ContainerState_CONTAINER_STOPPED)
		rt.table.ApplyUpdates(rpl.Update, rt.fail)
		if rt.strip {
			rpl.Update = stripUpdates(rpl.Update)
		}
		return rpl, nil
	case "RemoveContainer":
		pod, ctr := rt.container(st)
		err := rt.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr})
		rt.table.RemoveContainer(ctr.Id)
		return nil, err
	}
	return nil, fmt.Errorf("unknown op %q", st.Op)
}

// container resolves the container of a step and its pod (the step's pod
// overrides the container's pod_sandbox_id when given).
func (rt *runner) container(st *scenario.Step) (*api.PodSandbox, *api.Container) {
	pod, ctr := rt.table.Container(st.Container)
	if st.Pod != "" {
		pod = rt.table.Pod(st.Pod)
	}
	return pod, ctr
}

func result(rpl interface{}, err error) (interface{}, error) {
	if err != nil {
		return nil, err
	}
	return rpl, nil
}

func stripUpdates(updates []*api.ContainerUpdate) []*api.ContainerUpdate {
	var kept []*api.ContainerUpdate
	for _, u := range updates {
		if u = u.Strip(); u != nil {
			kept = append(kept, u)
		}
	}
	return kept
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
