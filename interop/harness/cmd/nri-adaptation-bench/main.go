// Command nri-adaptation-bench measures the official Go runtime adaptation
// (pkg/adaptation) with external plugin processes connected to its socket.
//
//	nri-adaptation-bench -plugin BIN [-mode create] [-plugins 1] [-n 5000] [-warmup 500] [-registrations 10]
//	nri-adaptation-bench -plugin BIN -mode lifecycle [-plugins 8] [-n 1000] [-warmup 100]
//	nri-adaptation-bench -plugin BIN -mode sync [-containers 1000] [-rounds 5]
//	nri-adaptation-bench -plugin MODULE -mode wasm [-n 5000] [-warmup 500] [-registrations 3]
//
// BIN is a plugin with the command line and configuration of nri-ref-plugin
// (nri-ref-plugin itself, nri-rs-test-plugin, or one of the minimal
// plugins nri-min-plugin and nri-rs-min-plugin, which ignore the
// configuration and answer CreateContainer with one annotation). The Rust
// program nri-rs-adaptation-bench takes the same flags and prints the same
// document for our adaptation.
//
// Mode create:
//
//  1. registers -registrations plugins one at a time (each is started,
//     timed until its Synchronize has completed, then killed), and prints
//     every one of these times as well as their summary;
//  2. starts -plugins plugins, each subscribed to CreateContainer only and
//     answering with one annotation and one environment variable of its own;
//     once every plugin's adjustment shows in a CreateContainer reply it
//     reads their resident memory (VmRSS) and its own;
//  3. times -n CreateContainer calls (after -warmup unmeasured ones), then
//     reads its own VmRSS again.
//
// Mode lifecycle: -plugins plugins subscribed to CreateContainer,
// StartContainer, StopContainer and RemoveContainer; -n container
// lifecycles (create, start, stop, remove) one after the other, timed one
// by one and as a whole.
//
// Mode sync: a table of -containers containers (ten per pod, each with four
// 1 KiB annotations) is offered to -rounds plugins started one at a time;
// each Synchronize (split into messages of at most 4 MiB) is timed inside
// the runtime's sync callback, and from the plugin's process start; every
// round's times are printed as well as their summaries.
//
// Mode wasm: MODULE is a WebAssembly plugin (the interop harness's
// nri-wasm-scripted), installed as the pre-installed plugin 10-wasm with the
// configuration {"tag": "bench"}. -registrations runtimes are created and
// started one after the other, each timed from adaptation.New until Start
// returned (the module loaded, configured and synchronized) and stopped;
// then one more is started, its first CreateContainer call is timed alone,
// and -n calls after -warmup unmeasured ones.
//
// It prints one JSON document, e.g. for mode create:
//
//	{"create": {"median_us": 120.5, "p99_us": 300.1},
//	 "registration": {"median_us": 9000, "p99_us": 12000},
//	 "registration_samples_us": [9100.2, 8890.7, ...],
//	 "plugin_rss_kib": [9876], "runtime_rss_kib": 12000, "runtime_rss_after_kib": 12500,
//	 "plugins": 1, "iterations": 5000, "gomaxprocs": 2, "go_version": "go1.26.8"}
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	"google.golang.org/protobuf/proto"
)

// Latency is the summary of one measurement.
type Latency struct {
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
}

// Window is the lifecycle latency of one window of the load mode.
type Window struct {
	StartS   int     `json:"start_s"`
	Count    int     `json:"count"`
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
	MaxUs    float64 `json:"max_us"`
}

// loadWindow is the length of one window of the load mode.
const loadWindow = 5 * time.Second

// loadUpdateTarget is the container the unsolicited updates of the load
// mode name.
const loadUpdateTarget = "load-ctr"

// Report is the output document; fields of other modes are left out.
type Report struct {
	Mode         string   `json:"mode"`
	Create       *Latency `json:"create,omitempty"`
	Registration *Latency `json:"registration,omitempty"`
	// RegistrationSamplesUs holds every timed registration in the order
	// measured, so that the runs of one case can be pooled.
	RegistrationSamplesUs  []float64 `json:"registration_samples_us,omitempty"`
	PluginRSSKiB           []int     `json:"plugin_rss_kib,omitempty"`
	PluginAnonKiB          []int     `json:"plugin_anon_kib,omitempty"`
	RuntimeAnonKiB         int       `json:"runtime_anon_kib,omitempty"`
	RuntimeRSSKiB          int       `json:"runtime_rss_kib,omitempty"`
	RuntimeRSSAfterKiB     int       `json:"runtime_rss_after_kib,omitempty"`
	RuntimeCPUUsPerCall    float64   `json:"runtime_cpu_us_per_call,omitempty"`
	PluginsCPUUsPerCall    float64   `json:"plugins_cpu_us_per_call,omitempty"`
	Startup                *Latency  `json:"startup,omitempty"`
	FirstCreateUs          float64   `json:"first_create_us,omitempty"`
	Lifecycle              *Latency  `json:"lifecycle,omitempty"`
	LifecyclesPerS         float64   `json:"lifecycles_per_s,omitempty"`
	Sync                   *Latency  `json:"sync,omitempty"`
	SyncSamplesUs          []float64 `json:"sync_samples_us,omitempty"`
	SyncFromStart          *Latency  `json:"sync_from_start,omitempty"`
	SyncFromStartSamplesUs []float64 `json:"sync_from_start_samples_us,omitempty"`
	SyncRuntimeCPUUs       float64   `json:"sync_runtime_cpu_us,omitempty"`
	SyncPluginCPUUs        float64   `json:"sync_plugin_cpu_us,omitempty"`
	Containers             int       `json:"containers,omitempty"`
	Pods                   int       `json:"pods,omitempty"`
	SyncBytes              int       `json:"sync_bytes,omitempty"`
	LoadWindows            []Window  `json:"load_windows,omitempty"`
	LoadLate               *int      `json:"load_late,omitempty"`
	UpdatesReceived        *uint64   `json:"updates_received,omitempty"`
	Plugins                int       `json:"plugins"`
	Iterations             int       `json:"iterations"`
	GoMaxProcs             int       `json:"gomaxprocs"`
	GoVersion              string    `json:"go_version"`
}

// pluginConfig is the nri-ref-plugin configuration the bench writes.
type pluginConfig struct {
	Events      []string                 `json:"events"`
	Adjust      *api.ContainerAdjustment `json:"adjust,omitempty"`
	Unsolicited []unsolicited            `json:"unsolicited,omitempty"`
}

// unsolicited is an nri-ref-plugin repeated UpdateContainers call.
type unsolicited struct {
	EveryMs int                    `json:"every_ms"`
	Updates []*api.ContainerUpdate `json:"updates"`
}

type bench struct {
	dir      string
	socket   string
	plugin   string
	nri      *adaptation.Adaptation
	syncDone chan syncTimes
	updates  atomic.Uint64
	pods     []*api.PodSandbox
	ctrs     []*api.Container
}

// syncTimes is one completed Synchronize: its start and end in the sync
// callback.
type syncTimes struct {
	start, end time.Time
}

func main() {
	plugin := flag.String("plugin", "", "plugin binary (nri-ref-plugin command line)")
	mode := flag.String("mode", "create", "create, lifecycle or sync")
	plugins := flag.Int("plugins", 1, "subscribed plugins during the measurement")
	n := flag.Int("n", 5000, "measured calls (create) or lifecycles (lifecycle)")
	warmup := flag.Int("warmup", 500, "calls or lifecycles before measuring")
	registrations := flag.Int("registrations", 10, "plugins registered one at a time and timed")
	containers := flag.Int("containers", 1000, "containers in the table (sync)")
	rounds := flag.Int("rounds", 5, "plugins synchronized one at a time (sync)")
	rate := flag.Int("rate", 100, "lifecycles started per second (load)")
	duration := flag.Int("duration", 60, "seconds of load (load)")
	updateMs := flag.Int("update-ms", 100, "each plugin's unsolicited update period in ms (load)")
	flag.Parse()
	if *plugin == "" || *plugins < 1 || *plugins > 40 || *n < 1 || *warmup < 0 || *registrations < 0 ||
		*containers < 10 || *rounds < 1 || *rate < 1 || *duration < 1 || *updateMs < 1 {
		fmt.Fprintln(os.Stderr, "nri-adaptation-bench: need -plugin; -plugins in 1..40, -n, -rounds positive, -containers at least 10, -warmup and -registrations not negative")
		os.Exit(2)
	}
	var err error
	switch *mode {
	case "create":
		err = run(*plugin, *plugins, *n, *warmup, *registrations)
	case "lifecycle":
		err = runLifecycle(*plugin, *plugins, *n, *warmup)
	case "sync":
		err = runSync(*plugin, *containers, *rounds)
	case "load":
		err = runLoad(*plugin, *plugins, *warmup, *rate, *duration, *updateMs)
	case "wasm":
		err = runWasm(*plugin, *n, *warmup, *registrations)
	default:
		fmt.Fprintln(os.Stderr, "nri-adaptation-bench: unknown -mode", *mode)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-adaptation-bench:", err)
		os.Exit(1)
	}
}

// start creates and starts the adaptation in a fresh directory; the
// returned function stops it and removes the directory.
func start(plugin string, pods []*api.PodSandbox, ctrs []*api.Container) (*bench, func(), error) {
	dir, err := os.MkdirTemp("", "nri-adaptation-bench-")
	if err != nil {
		return nil, nil, err
	}
	for _, sub := range []string{"plugins", "conf"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, nil, err
		}
	}
	b := &bench{
		dir:      dir,
		socket:   filepath.Join(dir, "nri.sock"),
		plugin:   plugin,
		syncDone: make(chan syncTimes, 128),
		pods:     pods,
		ctrs:     ctrs,
	}
	b.nri, err = adaptation.New("nri-adaptation-bench", "v0.0.0", b.syncFn, b.updateFn,
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")),
		adaptation.WithSocketPath(b.socket),
	)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("create adaptation: %w", err)
	}
	if err := b.nri.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("start adaptation: %w", err)
	}
	// Start synchronizes the (absent) pre-installed plugins once.
	drain(b.syncDone)
	return b, func() {
		b.nri.Stop()
		os.RemoveAll(dir)
	}, nil
}

// startPlugins starts plugins 0..count-1 with their configurations and
// waits until every one's annotation shows in a CreateContainer reply.
func (b *bench) startPlugins(count int, config func(int) pluginConfig) ([]*exec.Cmd, error) {
	procs := make([]*exec.Cmd, 0, count)
	for i := 0; i < count; i++ {
		p, err := b.spawn(i, fmt.Sprintf("bench%d", i), config(i))
		if err != nil {
			stopAll(procs)
			return nil, err
		}
		procs = append(procs, p)
	}
	if err := b.waitAdjusted(count, 30*time.Second); err != nil {
		stopAll(procs)
		return nil, err
	}
	return procs, nil
}

func run(plugin string, plugins, n, warmup, registrations int) error {
	b, done, err := start(plugin, nil, nil)
	if err != nil {
		return err
	}
	defer done()

	reg, err := b.registrations(registrations)
	if err != nil {
		return err
	}

	procs, err := b.startPlugins(plugins, benchConfig)
	if err != nil {
		return err
	}
	defer stopAll(procs)
	time.Sleep(200 * time.Millisecond)
	rss := make([]int, 0, plugins)
	anon := make([]int, 0, plugins)
	for _, p := range procs {
		kib, err := vmRSS(p.Process.Pid)
		if err != nil {
			return err
		}
		rss = append(rss, kib)
		kib, err = statusKiB(p.Process.Pid, "RssAnon:")
		if err != nil {
			return err
		}
		anon = append(anon, kib)
	}
	runtimeRSS, err := vmRSS(os.Getpid())
	if err != nil {
		return err
	}
	runtimeAnon, err := statusKiB(os.Getpid(), "RssAnon:")
	if err != nil {
		return err
	}

	samples := make([]time.Duration, 0, n)
	var rtBefore, plBefore int
	for i := 0; i < warmup+n; i++ {
		if i == warmup {
			if rtBefore, plBefore, err = cpuTicks(procs); err != nil {
				return err
			}
		}
		req := createRequest(i)
		start := time.Now()
		rsp, err := b.nri.CreateContainer(context.Background(), req)
		elapsed := time.Since(start)
		if err != nil {
			return fmt.Errorf("CreateContainer %d: %w", i, err)
		}
		if got := len(rsp.GetAdjust().GetAnnotations()); got != plugins {
			return fmt.Errorf("CreateContainer %d: %d annotations, want %d", i, got, plugins)
		}
		if i >= warmup {
			samples = append(samples, elapsed)
		}
	}

	rtAfter, plAfter, err := cpuTicks(procs)
	if err != nil {
		return err
	}
	perCall := func(before, after int) float64 {
		return float64(after-before) * 1e6 / userHZ / float64(max(n, 1))
	}
	runtimeAfter, err := vmRSS(os.Getpid())
	if err != nil {
		return err
	}
	// summarize sorts its samples: keep the order measured first.
	regUs := micros(reg)
	create, registration := summarize(samples), summarize(reg)
	return emit(Report{
		Mode:                  "create",
		RuntimeCPUUsPerCall:   perCall(rtBefore, rtAfter),
		PluginsCPUUsPerCall:   perCall(plBefore, plAfter),
		Create:                &create,
		Registration:          &registration,
		RegistrationSamplesUs: regUs,
		PluginRSSKiB:          rss,
		PluginAnonKiB:         anon,
		RuntimeRSSKiB:         runtimeRSS,
		RuntimeAnonKiB:        runtimeAnon,
		RuntimeRSSAfterKiB:    runtimeAfter,
		Plugins:               plugins,
		Iterations:            n,
	})
}

// oneLifecycle runs container i through create, start, stop and remove;
// every plugin must adjust the creation.
func (b *bench) oneLifecycle(ctx context.Context, i, plugins int) error {
	req := createRequest(i)
	pod, ctr := req.Pod, req.Container
	rsp, err := b.nri.CreateContainer(ctx, req)
	if err != nil {
		return fmt.Errorf("CreateContainer %d: %w", i, err)
	}
	if got := len(rsp.GetAdjust().GetAnnotations()); got != plugins {
		return fmt.Errorf("CreateContainer %d: %d annotations, want %d", i, got, plugins)
	}
	ctr.State = api.ContainerState_CONTAINER_RUNNING
	if err := b.nri.StartContainer(ctx, &api.StartContainerRequest{Pod: pod, Container: ctr}); err != nil {
		return fmt.Errorf("StartContainer %d: %w", i, err)
	}
	ctr.State = api.ContainerState_CONTAINER_STOPPED
	if _, err := b.nri.StopContainer(ctx, &api.StopContainerRequest{Pod: pod, Container: ctr}); err != nil {
		return fmt.Errorf("StopContainer %d: %w", i, err)
	}
	if err := b.nri.RemoveContainer(ctx, &api.RemoveContainerRequest{Pod: pod, Container: ctr}); err != nil {
		return fmt.Errorf("RemoveContainer %d: %w", i, err)
	}
	return nil
}

// runWasm times the start-up of a runtime with one WebAssembly plugin and
// CreateContainer through it.
func runWasm(module string, n, warmup, starts int) error {
	dir, err := os.MkdirTemp("", "nri-adaptation-bench-wasm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	plugins, conf := filepath.Join(dir, "plugins"), filepath.Join(dir, "conf")
	for _, sub := range []string{plugins, conf} {
		if err := os.Mkdir(sub, 0o755); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(module)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(plugins, "10-wasm"), data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(conf, "10-wasm.conf"), []byte(`{"tag": "bench"}`), 0o644); err != nil {
		return err
	}
	b := &bench{dir: dir, syncDone: make(chan syncTimes, 128)}
	startOne := func() (*adaptation.Adaptation, time.Duration, error) {
		began := time.Now()
		nri, err := adaptation.New("nri-adaptation-bench", "v0.0.0", b.syncFn, b.updateFn,
			adaptation.WithPluginPath(plugins),
			adaptation.WithPluginConfigPath(conf),
			adaptation.WithDisabledExternalConnections(),
		)
		if err != nil {
			return nil, 0, fmt.Errorf("create adaptation: %w", err)
		}
		if err := nri.Start(); err != nil {
			return nil, 0, fmt.Errorf("start adaptation: %w", err)
		}
		return nri, time.Since(began), nil
	}
	startups := make([]time.Duration, 0, starts)
	for i := 0; i < starts; i++ {
		nri, took, err := startOne()
		if err != nil {
			return err
		}
		startups = append(startups, took)
		nri.Stop()
		drain(b.syncDone)
	}
	nri, _, err := startOne()
	if err != nil {
		return err
	}
	defer nri.Stop()
	drain(b.syncDone)

	var first time.Duration
	samples := make([]time.Duration, 0, n)
	for i := 0; i < 1+warmup+n; i++ {
		req := createRequest(i)
		start := time.Now()
		rsp, err := nri.CreateContainer(context.Background(), req)
		elapsed := time.Since(start)
		if err != nil {
			return fmt.Errorf("CreateContainer %d: %w", i, err)
		}
		if got := rsp.GetAdjust().GetAnnotations()["nri-wasm/adjusted"]; got != req.Container.Name {
			return fmt.Errorf("CreateContainer %d: annotation %q, want %q", i, got, req.Container.Name)
		}
		switch {
		case i == 0:
			first = elapsed
		case i > warmup:
			samples = append(samples, elapsed)
		}
	}
	create := summarize(samples)
	report := Report{
		Mode:          "wasm",
		Create:        &create,
		FirstCreateUs: float64(first.Nanoseconds()) / 1e3,
		Plugins:       1,
		Iterations:    n,
	}
	if starts > 0 {
		startup := summarize(startups)
		report.Startup = &startup
	}
	return emit(report)
}

// runLifecycle times container lifecycles through plugins subscribed to
// the four container events.
func runLifecycle(plugin string, plugins, n, warmup int) error {
	b, done, err := start(plugin, nil, nil)
	if err != nil {
		return err
	}
	defer done()
	procs, err := b.startPlugins(plugins, lifecycleConfig)
	if err != nil {
		return err
	}
	defer stopAll(procs)

	ctx := context.Background()
	samples := make([]time.Duration, 0, n)
	var began time.Time
	for i := 0; i < warmup+n; i++ {
		if i == warmup {
			began = time.Now()
		}
		start := time.Now()
		if err := b.oneLifecycle(ctx, i, plugins); err != nil {
			return err
		}
		if i >= warmup {
			samples = append(samples, time.Since(start))
		}
	}
	total := time.Since(began)
	lifecycle := summarize(samples)
	return emit(Report{
		Mode:           "lifecycle",
		Lifecycle:      &lifecycle,
		LifecyclesPerS: float64(n) / total.Seconds(),
		Plugins:        plugins,
		Iterations:     n,
	})
}

// runLoad starts lifecycles at a fixed rate for a while, one at a time,
// each timed from its scheduled start, while every plugin sends an
// unsolicited update every updateMs; the Rust program does the same.
func runLoad(plugin string, plugins, warmup, rate, seconds, updateMs int) error {
	b, done, err := start(plugin, nil, nil)
	if err != nil {
		return err
	}
	defer done()
	procs, err := b.startPlugins(plugins, func(i int) pluginConfig { return loadConfig(i, updateMs) })
	if err != nil {
		return err
	}
	defer stopAll(procs)

	ctx := context.Background()
	for i := 0; i < warmup; i++ {
		if err := b.oneLifecycle(ctx, i, plugins); err != nil {
			return err
		}
	}
	rssStart, err := vmRSS(os.Getpid())
	if err != nil {
		return err
	}
	updatesStart := b.updates.Load()
	period := time.Second / time.Duration(rate)
	total := time.Duration(seconds) * time.Second
	windows := int(total / loadWindow)
	if windows < 1 {
		windows = 1
	}
	samples := make([][]time.Duration, windows)
	var all []time.Duration
	late := 0
	t0 := time.Now()
	for n := 0; ; n++ {
		offset := period * time.Duration(n)
		if offset >= total {
			break
		}
		due := t0.Add(offset)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		} else if wait < 0 {
			late++
		}
		if err := b.oneLifecycle(ctx, warmup+n, plugins); err != nil {
			return err
		}
		latency := time.Since(due)
		w := int(offset / loadWindow)
		if w >= windows {
			w = windows - 1
		}
		samples[w] = append(samples[w], latency)
		all = append(all, latency)
	}
	rssEnd, err := vmRSS(os.Getpid())
	if err != nil {
		return err
	}
	updates := b.updates.Load() - updatesStart
	out := make([]Window, 0, windows)
	for w, s := range samples {
		if len(s) == 0 {
			return fmt.Errorf("load window %d: no samples", w)
		}
		max := s[0]
		for _, d := range s {
			if d > max {
				max = d
			}
		}
		lat := summarize(s)
		out = append(out, Window{
			StartS: w * int(loadWindow/time.Second), Count: len(s),
			MedianUs: lat.MedianUs, P99Us: lat.P99Us, MaxUs: float64(max.Nanoseconds()) / 1e3,
		})
	}
	lifecycle := summarize(all)
	return emit(Report{
		Mode:               "load",
		Lifecycle:          &lifecycle,
		LoadWindows:        out,
		LoadLate:           &late,
		UpdatesReceived:    &updates,
		RuntimeRSSKiB:      rssStart,
		RuntimeRSSAfterKiB: rssEnd,
		Plugins:            plugins,
		Iterations:         len(all),
	})
}

// runSync times Synchronize of a large table, one plugin at a time.
func runSync(plugin string, containers, rounds int) error {
	pods, ctrs := syncTable(containers)
	size := 0
	for _, p := range pods {
		size += proto.Size(p)
	}
	for _, c := range ctrs {
		size += proto.Size(c)
	}
	// The whole split Synchronize must fit in one request timeout.
	adaptation.SetPluginRequestTimeout(120 * time.Second)
	b, done, err := start(plugin, pods, ctrs)
	if err != nil {
		return err
	}
	defer done()

	inside := make([]time.Duration, 0, rounds)
	fromStart := make([]time.Duration, 0, rounds)
	runtimeTicks, pluginTicks := 0, 0
	for i := 0; i < rounds; i++ {
		runtimeBefore, err := processCPUTicks(os.Getpid())
		if err != nil {
			return err
		}
		began := time.Now()
		p, err := b.spawn(50+i%10, fmt.Sprintf("sync%d", i), pluginConfig{Events: []string{"CreateContainer"}})
		if err != nil {
			return err
		}
		select {
		case t := <-b.syncDone:
			inside = append(inside, t.end.Sub(t.start))
			fromStart = append(fromStart, t.end.Sub(began))
		case <-time.After(180 * time.Second):
			stop(p)
			return fmt.Errorf("sync %d: plugin not synchronized within 180s", i)
		}
		runtime, plugin, err := cpuTicks([]*exec.Cmd{p})
		if err != nil {
			stop(p)
			return err
		}
		runtimeTicks += runtime - runtimeBefore
		pluginTicks += plugin
		stop(p)
		time.Sleep(50 * time.Millisecond)
	}
	// summarize sorts its samples: keep the order measured first.
	insideUs, fromStartUs := micros(inside), micros(fromStart)
	syncLat, fromStartLat := summarize(inside), summarize(fromStart)
	perRound := func(ticks int) float64 {
		return float64(ticks) * 1e6 / userHZ / float64(max(rounds, 1))
	}
	return emit(Report{
		Mode:                   "sync",
		SyncRuntimeCPUUs:       perRound(runtimeTicks),
		SyncPluginCPUUs:        perRound(pluginTicks),
		Sync:                   &syncLat,
		SyncSamplesUs:          insideUs,
		SyncFromStart:          &fromStartLat,
		SyncFromStartSamplesUs: fromStartUs,
		Containers:             containers,
		Pods:                   len(pods),
		SyncBytes:              size,
		Plugins:                1,
		Iterations:             rounds,
	})
}

// syncTable is the table of the sync mode: ten containers per pod, each
// with four annotations of 1 KiB. The Rust program builds the same one.
func syncTable(containers int) ([]*api.PodSandbox, []*api.Container) {
	pods := make([]*api.PodSandbox, 0, containers/10)
	for p := 0; p < containers/10; p++ {
		id := fmt.Sprintf("pod%d", p)
		pods = append(pods, &api.PodSandbox{
			Id: id, Name: id, Uid: fmt.Sprintf("uid%d", p), Namespace: "default",
		})
	}
	ctrs := make([]*api.Container, 0, containers)
	for c := 0; c < containers; c++ {
		id := fmt.Sprintf("ctr%d", c)
		annotations := make(map[string]string, 4)
		for k := 0; k < 4; k++ {
			annotations[fmt.Sprintf("bench.nri.io/blob-%d", k)] = strings.Repeat(string(rune('a'+k)), 1024)
		}
		ctrs = append(ctrs, &api.Container{
			Id:           id,
			PodSandboxId: fmt.Sprintf("pod%d", c/10),
			Name:         id,
			State:        api.ContainerState_CONTAINER_RUNNING,
			Args:         []string{"sleep", "3600"},
			Env:          []string{"PATH=/usr/bin:/bin"},
			Annotations:  annotations,
		})
	}
	return pods, ctrs
}

func emit(r Report) error {
	r.GoMaxProcs = runtime.GOMAXPROCS(0)
	r.GoVersion = runtime.Version()
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// syncFn hands the plugin the table and reports when it is done.
func (b *bench) syncFn(ctx context.Context, cb adaptation.SyncCB) error {
	start := time.Now()
	_, err := cb(ctx, b.pods, b.ctrs)
	if err == nil {
		b.syncDone <- syncTimes{start: start, end: time.Now()}
	}
	return err
}

func (b *bench) updateFn(_ context.Context, updates []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
	b.updates.Add(uint64(len(updates)))
	return nil, nil
}

// registrations times plugins from process start to completed Synchronize,
// one at a time.
func (b *bench) registrations(count int) ([]time.Duration, error) {
	samples := make([]time.Duration, 0, count)
	for i := 0; i < count; i++ {
		start := time.Now()
		p, err := b.spawn(90+i%10, fmt.Sprintf("reg%d", i), pluginConfig{Events: []string{"CreateContainer"}})
		if err != nil {
			return nil, err
		}
		select {
		case done := <-b.syncDone:
			samples = append(samples, done.end.Sub(start))
		case <-time.After(30 * time.Second):
			stop(p)
			return nil, fmt.Errorf("registration %d: plugin not synchronized within 30s", i)
		}
		stop(p)
		// Let the adaptation notice the closed connection.
		time.Sleep(50 * time.Millisecond)
	}
	return samples, nil
}

// waitAdjusted polls CreateContainer until every plugin's annotation shows.
func (b *bench) waitAdjusted(plugins int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		rsp, err := b.nri.CreateContainer(context.Background(), createRequest(-1))
		if err == nil && len(rsp.GetAdjust().GetAnnotations()) == plugins {
			drain(b.syncDone)
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%d plugins did not all adjust within %v", plugins, timeout)
}

// spawn starts one external plugin with its configuration file.
func (b *bench) spawn(idx int, name string, cfg pluginConfig) (*exec.Cmd, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(b.dir, name+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(b.plugin, "-config", path, "-name", name,
		"-idx", fmt.Sprintf("%02d", idx), "-socket", b.socket)
	cmd.Stdout = nil
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", b.plugin, err)
	}
	return cmd, nil
}

func stop(p *exec.Cmd) {
	_ = p.Process.Kill()
	_ = p.Wait()
}

func stopAll(procs []*exec.Cmd) {
	for _, p := range procs {
		stop(p)
	}
}

func drain(ch chan syncTimes) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// benchConfig is plugin i's configuration: one annotation, one variable.
func benchConfig(i int) pluginConfig {
	return pluginConfig{
		Events: []string{"CreateContainer"},
		Adjust: &api.ContainerAdjustment{
			Annotations: map[string]string{fmt.Sprintf("bench.nri.io/plugin-%d", i): "on"},
			Env:         []*api.KeyValue{{Key: fmt.Sprintf("BENCH_PLUGIN_%d", i), Value: "on"}},
		},
	}
}

// lifecycleConfig is plugin i's configuration in mode lifecycle.
func lifecycleConfig(i int) pluginConfig {
	cfg := benchConfig(i)
	cfg.Events = []string{"CreateContainer", "StartContainer", "StopContainer", "RemoveContainer"}
	return cfg
}

// loadConfig is plugin i's configuration in mode load: as in lifecycle,
// plus an unsolicited CPU-shares update of loadUpdateTarget every updateMs.
func loadConfig(i, updateMs int) pluginConfig {
	cfg := lifecycleConfig(i)
	cfg.Unsolicited = []unsolicited{{
		EveryMs: updateMs,
		Updates: []*api.ContainerUpdate{{
			ContainerId: loadUpdateTarget,
			Linux: &api.LinuxContainerUpdate{Resources: &api.LinuxResources{
				Cpu: &api.LinuxCPU{Shares: &api.OptionalUInt64{Value: uint64(512 + i)}},
			}},
		}},
	}}
	return cfg
}

// createRequest is the request of call i; the Rust bench sends the same.
func createRequest(i int) *api.CreateContainerRequest {
	id := fmt.Sprintf("ctr%d", i)
	return &api.CreateContainerRequest{
		Pod: &api.PodSandbox{Id: "pod0", Name: "pod0", Uid: "uid0", Namespace: "default"},
		Container: &api.Container{
			Id:           id,
			PodSandboxId: "pod0",
			Name:         id,
			State:        api.ContainerState_CONTAINER_CREATED,
			Args:         []string{"sleep", "3600"},
			Env:          []string{"PATH=/usr/bin:/bin"},
		},
	}
}

// vmRSS reads the resident set size of a process, in KiB.
// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, what
// sysconf(_SC_CLK_TCK) returns: 100 on Linux).
const userHZ = 100.0

// cpuTicks returns the CPU time (user and system, all threads) so far, in
// USER_HZ ticks, of this process and of all procs together.
func cpuTicks(procs []*exec.Cmd) (runtime, plugins int, err error) {
	if runtime, err = processCPUTicks(os.Getpid()); err != nil {
		return 0, 0, err
	}
	for _, p := range procs {
		t, err := processCPUTicks(p.Process.Pid)
		if err != nil {
			return 0, 0, err
		}
		plugins += t
	}
	return runtime, plugins, nil
}

// processCPUTicks returns utime + stime of /proc/<pid>/stat.
func processCPUTicks(pid int) (int, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", path)
	}
	fields := strings.Fields(string(data[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%s: %d fields", path, len(fields))
	}
	utime, err := strconv.Atoi(fields[11])
	if err != nil {
		return 0, fmt.Errorf("%s: utime: %w", path, err)
	}
	stime, err := strconv.Atoi(fields[12])
	if err != nil {
		return 0, fmt.Errorf("%s: stime: %w", path, err)
	}
	return utime + stime, nil
}

func vmRSS(pid int) (int, error) {
	return statusKiB(pid, "VmRSS:")
}

// statusKiB reads one size (in KiB) of /proc/<pid>/status, e.g. "RssAnon:".
func statusKiB(pid int, field string) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				return strconv.Atoi(fields[0])
			}
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// micros returns each sample in microseconds, in the given order.
func micros(samples []time.Duration) []float64 {
	us := make([]float64, len(samples))
	for i, d := range samples {
		us[i] = float64(d.Nanoseconds()) / 1e3
	}
	return us
}

// summarize returns the median and 99th percentile (nearest rank).
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	rank := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(samples)))) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(samples) {
			i = len(samples) - 1
		}
		return float64(samples[i].Nanoseconds()) / 1e3
	}
	return Latency{MedianUs: rank(0.5), P99Us: rank(0.99)}
}
