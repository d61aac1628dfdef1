// Command nri-ref-runtime runs the official NRI runtime adaptation
// (github.com/containerd/nri/pkg/adaptation) and replays a scenario of pod
// and container lifecycle events against the connected plugins. It prints
// one JSON document with the result of every step. See interop/README.md.
//
// Built with -tags nri_v09 against NRI v0.9.0 (go.v0.9.mod) it is
// nri-ref-runtime-old, an old runtime (containerd 1.7/2.0 era): its
// notification entry points take a StateChangeEvent, so RunPodSandbox,
// StopPodSandbox, RemovePodSandbox, PostCreateContainer, StartContainer,
// PostStartContainer, PostUpdateContainer and RemoveContainer reach plugins
// as StateChange RPCs; UpdatePodSandbox and PostUpdatePodSandbox do not exist
// in that version, those steps fail with an error. What differs between the
// versions is in nri_v012.go and nri_v09.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"

	"nri-rs.dev/interop/harness/internal/scenario"
)

func main() {
	var (
		scenarioPath = flag.String("scenario", "", "scenario file (JSON)")
		socketPath   = flag.String("socket", "", "socket for external plugins (empty: external plugins disabled)")
		pluginDir    = flag.String("plugin-dir", "", "directory of pre-installed plugins (empty: none)")
		configDir    = flag.String("plugin-config-dir", "", "drop-in directory of plugin configuration (empty: none)")
		outputPath   = flag.String("output", "", "output file (default stdout)")
		raw          = flag.Bool("raw", rawDefault, rawUsage)
	)
	flag.Parse()

	if *scenarioPath == "" {
		fmt.Fprintln(os.Stderr, progName+": -scenario is required")
		os.Exit(2)
	}
	sc, err := scenario.Load(*scenarioPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, progName+":", err)
		os.Exit(2)
	}

	out := run(sc, *socketPath, *pluginDir, *configDir, !*raw)
	if err := scenario.WriteOutput(out, *outputPath); err != nil {
		fmt.Fprintln(os.Stderr, progName+": write output:", err)
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
	tracer tracer
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
	tracing, stopTracing := rt.setUpTracing()
	defer stopTracing()
	clientInterceptors := append(tracing, rt.rec.ClientInterceptor)
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
		dir, err := os.MkdirTemp("", progName+"-")
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
	ctx, traceID, end := rt.startSpan(context.Background(), st.Op)
	defer end()
	res.TraceID = traceID
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
		err := rt.notify(ctx, st.Op, pod, nil)
		if err == nil {
			rt.table.AddPod(pod)
		}
		return nil, err
	case "UpdatePodSandbox", "PostUpdatePodSandbox":
		return rt.updatePodSandbox(ctx, st)
	case "StopPodSandbox":
		return nil, rt.notify(ctx, st.Op, rt.table.Pod(st.Pod), nil)
	case "RemovePodSandbox":
		err := rt.notify(ctx, st.Op, rt.table.Pod(st.Pod), nil)
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
			rpl.Adjust = stripAdjustment(rpl.Adjust)
			rpl.Update = stripUpdates(rpl.Update)
		}
		return rpl, nil
	case "PostCreateContainer":
		pod, ctr := rt.container(st)
		return nil, rt.notify(ctx, st.Op, pod, ctr)
	case "StartContainer":
		pod, ctr := rt.container(st)
		err := rt.notify(ctx, st.Op, pod, ctr)
		if err == nil {
			rt.table.SetState(ctr.Id, api.ContainerState_CONTAINER_RUNNING)
		}
		return nil, err
	case "PostStartContainer":
		pod, ctr := rt.container(st)
		return nil, rt.notify(ctx, st.Op, pod, ctr)
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
		return nil, rt.notify(ctx, st.Op, pod, ctr)
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
		err := rt.notify(ctx, st.Op, pod, ctr)
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

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
