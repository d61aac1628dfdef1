// Command nri-ref-runtime-old is nri-ref-runtime built on the NRI v0.9.0
// runtime adaptation: an old runtime (containerd 1.7/2.0 era). Its
// notification entry points take a StateChangeEvent, so RunPodSandbox,
// StopPodSandbox, RemovePodSandbox, PostCreateContainer, StartContainer,
// PostStartContainer, PostUpdateContainer and RemoveContainer reach plugins
// as StateChange RPCs. UpdatePodSandbox and PostUpdatePodSandbox do not
// exist in this version; those steps fail with an error. Flags, scenario
// and output format are those of nri-ref-runtime (see interop/README.md).
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

	"nri-rs.dev/interop/harness-shared/scenario"
)

func main() {
	var (
		scenarioPath = flag.String("scenario", "", "scenario file (JSON)")
		socketPath   = flag.String("socket", "", "socket for external plugins (empty: external plugins disabled)")
		pluginDir    = flag.String("plugin-dir", "", "directory of pre-installed plugins (empty: none)")
		configDir    = flag.String("plugin-config-dir", "", "drop-in directory of plugin configuration (empty: none)")
		outputPath   = flag.String("output", "", "output file (default stdout)")
		_            = flag.Bool("raw", true, "accepted for compatibility; v0.9.0 has no Strip helpers, results are always raw")
	)
	flag.Parse()

	if *scenarioPath == "" {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime-old: -scenario is required")
		os.Exit(2)
	}
	sc, err := scenario.Load(*scenarioPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime-old:", err)
		os.Exit(2)
	}
	out := run(sc, *socketPath, *pluginDir, *configDir)
	if err := scenario.WriteOutput(out, *outputPath); err != nil {
		fmt.Fprintln(os.Stderr, "nri-ref-runtime-old: write output:", err)
		os.Exit(1)
	}
	if out.Error != "" {
		os.Exit(1)
	}
}

type runner struct {
	table *scenario.Table
	rec   *scenario.Recorder
	fail  map[string]bool
	nri   *adaptation.Adaptation
}

func run(sc *scenario.Scenario, socketPath, pluginDir, configDir string) *scenario.Output {
	out := &scenario.Output{Steps: []scenario.StepResult{}}
	rt := &runner{table: scenario.NewTable(sc), rec: scenario.NewRecorder(), fail: map[string]bool{}}
	for _, id := range sc.FailUpdates {
		rt.fail[id] = true
	}
	if sc.RegistrationTimeoutMs > 0 {
		adaptation.SetPluginRegistrationTimeout(ms(sc.RegistrationTimeoutMs))
	}
	if sc.RequestTimeoutMs > 0 {
		adaptation.SetPluginRequestTimeout(ms(sc.RequestTimeoutMs))
	}

	tmp, err := os.MkdirTemp("", "nri-ref-runtime-old-")
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer os.RemoveAll(tmp)
	if pluginDir == "" {
		pluginDir = tmp
	}
	if configDir == "" {
		configDir = tmp
	}
	opts := []adaptation.Option{
		adaptation.WithPluginPath(pluginDir),
		adaptation.WithPluginConfigPath(configDir),
		adaptation.WithTTRPCOptions(
			[]ttrpc.ClientOpts{ttrpc.WithUnaryClientInterceptor(rt.rec.ClientInterceptor)},
			[]ttrpc.ServerOpt{ttrpc.WithUnaryServerInterceptor(rt.rec.ServerInterceptor)},
		),
	}
	if socketPath == "" {
		opts = append(opts, adaptation.WithDisabledExternalConnections())
	} else {
		opts = append(opts, adaptation.WithSocketPath(socketPath))
	}

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
		result, err := rt.exec(st)
		out.Steps = append(out.Steps, scenario.StepResult{
			Op: st.Op, Pod: st.Pod, Container: st.Container,
			Error: scenario.ErrString(err), Result: result,
		})
	}
	if !stopped {
		rt.nri.Stop()
	}
	rt.rec.Fill(out)
	return out
}

func (rt *runner) syncFn(ctx context.Context, cb adaptation.SyncCB) error {
	pods, ctrs := rt.table.Snapshot()
	updates, err := cb(ctx, pods, ctrs)
	if updates == nil {
		updates = []*api.ContainerUpdate{}
	}
	rec := scenario.SyncRecord{
		Pods: len(pods), Containers: len(ctrs), Updates: updates,
		Failed: []*api.ContainerUpdate{}, Error: scenario.ErrString(err),
	}
	if err == nil {
		rec.Failed = rt.table.ApplyUpdates(updates, rt.fail)
	}
	rt.rec.AddSync(rec)
	return err
}

func (rt *runner) updateFn(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	failed := rt.table.ApplyUpdates(updates, rt.fail)
	if updates == nil {
		updates = []*api.ContainerUpdate{}
	}
	rt.rec.AddUpdateCall(scenario.UpdateCall{Updates: updates, Failed: failed})
	return failed, nil
}

func (rt *runner) exec(st *scenario.Step) (interface{}, error) {
	ctx := context.Background()
	podEvt := func() *api.StateChangeEvent { return &api.StateChangeEvent{Pod: rt.table.Pod(st.Pod)} }
	ctrEvt := func() *api.StateChangeEvent {
		pod, ctr := rt.container(st)
		return &api.StateChangeEvent{Pod: pod, Container: ctr}
	}
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
		evt := podEvt()
		err := rt.nri.RunPodSandbox(ctx, evt)
		if err == nil {
			rt.table.AddPod(evt.Pod)
		}
		return nil, err
	case "StopPodSandbox":
		return nil, rt.nri.StopPodSandbox(ctx, podEvt())
	case "RemovePodSandbox":
		err := rt.nri.RemovePodSandbox(ctx, podEvt())
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
		return rpl, nil
	case "PostCreateContainer":
		return nil, rt.nri.PostCreateContainer(ctx, ctrEvt())
	case "StartContainer":
		err := rt.nri.StartContainer(ctx, ctrEvt())
		if err == nil {
			rt.table.SetState(st.Container, api.ContainerState_CONTAINER_RUNNING)
		}
		return nil, err
	case "PostStartContainer":
		return nil, rt.nri.PostStartContainer(ctx, ctrEvt())
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
		return rpl, nil
	case "PostUpdateContainer":
		return nil, rt.nri.PostUpdateContainer(ctx, ctrEvt())
	case "StopContainer":
		pod, ctr := rt.container(st)
		rpl, err := rt.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr})
		if err != nil {
			return nil, err
		}
		rt.table.SetState(ctr.Id, api.ContainerState_CONTAINER_STOPPED)
		rt.table.ApplyUpdates(rpl.Update, rt.fail)
		return rpl, nil
	case "RemoveContainer":
		err := rt.nri.RemoveContainer(ctx, ctrEvt())
		rt.table.RemoveContainer(st.Container)
		return nil, err
	case "UpdatePodSandbox", "PostUpdatePodSandbox":
		return nil, fmt.Errorf("%s is not supported by NRI v0.9.0", st.Op)
	}
	return nil, fmt.Errorf("unknown op %q", st.Op)
}

func (rt *runner) container(st *scenario.Step) (*api.PodSandbox, *api.Container) {
	pod, ctr := rt.table.Container(st.Container)
	if st.Pod != "" {
		pod = rt.table.Pod(st.Pod)
	}
	return pod, ctr
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
