// Command nri-adaptation-bench measures the official Go runtime adaptation
// (pkg/adaptation) with external plugin processes connected to its socket.
//
//	nri-adaptation-bench -plugin BIN [-plugins 1] [-n 5000] [-warmup 500] [-registrations 10]
//
// BIN is a plugin with the command line and configuration of nri-ref-plugin
// (nri-ref-plugin itself or nri-rs-test-plugin). The program
//
//  1. registers -registrations plugins one at a time (each is started,
//     timed until its Synchronize has completed, then killed);
//  2. starts -plugins plugins, each subscribed to CreateContainer only and
//     answering with one annotation and one environment variable of its own;
//     once every plugin's adjustment shows in a CreateContainer reply it
//     reads their resident memory (VmRSS);
//  3. times -n CreateContainer calls (after -warmup unmeasured ones).
//
// It prints one JSON document:
//
//	{"create": {"median_us": 120.5, "p99_us": 300.1},
//	 "registration": {"median_us": 9000, "p99_us": 12000},
//	 "plugin_rss_kib": [9876], "plugins": 1, "iterations": 5000,
//	 "gomaxprocs": 2, "go_version": "go1.26.8"}
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
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
)

// Latency is the summary of one measurement.
type Latency struct {
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
}

// Report is the output document.
type Report struct {
	Create       Latency `json:"create"`
	Registration Latency `json:"registration"`
	PluginRSSKiB []int   `json:"plugin_rss_kib"`
	Plugins      int     `json:"plugins"`
	Iterations   int     `json:"iterations"`
	GoMaxProcs   int     `json:"gomaxprocs"`
	GoVersion    string  `json:"go_version"`
}

// pluginConfig is the nri-ref-plugin configuration the bench writes.
type pluginConfig struct {
	Events []string                 `json:"events"`
	Adjust *api.ContainerAdjustment `json:"adjust,omitempty"`
}

type bench struct {
	dir      string
	socket   string
	plugin   string
	nri      *adaptation.Adaptation
	syncDone chan time.Time
}

func main() {
	plugin := flag.String("plugin", "", "plugin binary (nri-ref-plugin command line)")
	plugins := flag.Int("plugins", 1, "subscribed plugins during the CreateContainer measurement")
	n := flag.Int("n", 5000, "measured CreateContainer calls")
	warmup := flag.Int("warmup", 500, "CreateContainer calls before measuring")
	registrations := flag.Int("registrations", 10, "plugins registered one at a time and timed")
	flag.Parse()
	if *plugin == "" || *plugins < 1 || *plugins > 90 || *n < 1 || *warmup < 0 || *registrations < 0 {
		fmt.Fprintln(os.Stderr, "nri-adaptation-bench: need -plugin; -plugins in 1..90, -n positive, -warmup and -registrations not negative")
		os.Exit(2)
	}
	if err := run(*plugin, *plugins, *n, *warmup, *registrations); err != nil {
		fmt.Fprintln(os.Stderr, "nri-adaptation-bench:", err)
		os.Exit(1)
	}
}

func run(plugin string, plugins, n, warmup, registrations int) error {
	dir, err := os.MkdirTemp("", "nri-adaptation-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, sub := range []string{"plugins", "conf"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	b := &bench{
		dir:      dir,
		socket:   filepath.Join(dir, "nri.sock"),
		plugin:   plugin,
		syncDone: make(chan time.Time, 128),
	}
	b.nri, err = adaptation.New("nri-adaptation-bench", "v0.0.0", b.syncFn, b.updateFn,
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")),
		adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")),
		adaptation.WithSocketPath(b.socket),
	)
	if err != nil {
		return fmt.Errorf("create adaptation: %w", err)
	}
	if err := b.nri.Start(); err != nil {
		return fmt.Errorf("start adaptation: %w", err)
	}
	defer b.nri.Stop()
	// Start synchronizes the (absent) pre-installed plugins once.
	drain(b.syncDone)

	reg, err := b.registrations(registrations)
	if err != nil {
		return err
	}

	procs := make([]*exec.Cmd, 0, plugins)
	defer func() {
		for _, p := range procs {
			stop(p)
		}
	}()
	for i := 0; i < plugins; i++ {
		p, err := b.spawn(i, fmt.Sprintf("bench%d", i), benchConfig(i))
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}
	if err := b.waitAdjusted(plugins, 30*time.Second); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	rss := make([]int, 0, plugins)
	for _, p := range procs {
		kib, err := vmRSS(p.Process.Pid)
		if err != nil {
			return err
		}
		rss = append(rss, kib)
	}

	samples := make([]time.Duration, 0, n)
	for i := 0; i < warmup+n; i++ {
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

	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(Report{
		Create:       summarize(samples),
		Registration: summarize(reg),
		PluginRSSKiB: rss,
		Plugins:      plugins,
		Iterations:   n,
		GoMaxProcs:   runtime.GOMAXPROCS(0),
		GoVersion:    runtime.Version(),
	})
}

// syncFn hands the plugin an empty table and reports when it is done.
func (b *bench) syncFn(ctx context.Context, cb adaptation.SyncCB) error {
	_, err := cb(ctx, nil, nil)
	if err == nil {
		b.syncDone <- time.Now()
	}
	return err
}

func (b *bench) updateFn(_ context.Context, _ []*api.ContainerUpdate) ([]*api.ContainerUpdate, error) {
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
			samples = append(samples, done.Sub(start))
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

func drain(ch chan time.Time) {
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
func vmRSS(pid int) (int, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) > 0 {
				return strconv.Atoi(fields[0])
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
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
