// Command nri-ref-plugin is an NRI plugin built on the official stub
// (github.com/containerd/nri/pkg/stub). It implements every handler, logs
// every event it receives as a JSON line, and answers as its JSON
// configuration tells it to. See interop/README.md.
//
// Built with -tags nri_v09 against NRI v0.9.0 (go.v0.9.mod) it is
// nri-ref-plugin-old: the same plugin for the events v0.9.0 knows. That
// stub has no dedicated RPCs for the notification events, so a runtime
// delivers them as StateChange (the log's "rpc" field). What differs between
// the versions is in nri_v012.go and nri_v09.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type plugin struct {
	cfg  *Config
	log  *eventLog
	stub stub.Stub

	evictMu      sync.Mutex
	pendingEvict []*api.ContainerEviction
	sendMu       sync.Mutex

	firedMu sync.Mutex
	fired   map[int]bool
}

func main() {
	var (
		configPath = flag.String("config", "", "plugin configuration (JSON)")
		name       = flag.String("name", "", "plugin name (external mode)")
		idx        = flag.String("idx", "", "plugin index (external mode)")
		socketPath = flag.String("socket", "", "NRI socket to connect to (external mode)")
		logPath    = flag.String("log", "", "JSON-lines event log")
	)
	flag.Parse()

	cfg, err := loadConfig(*configPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, progName+":", err)
		os.Exit(2)
	}
	if *logPath != "" {
		cfg.Log = *logPath
	}
	elog, err := openLog(cfg.Log)
	if err != nil {
		fmt.Fprintln(os.Stderr, progName+": open log:", err)
		os.Exit(2)
	}

	p := &plugin{cfg: cfg, log: elog, fired: map[int]bool{}}

	tracing, stopTracing := p.tracingInterceptors()
	defer stopTracing()
	serverInterceptors := append(tracing, p.serverInterceptor)

	closed := make(chan struct{})
	opts := []stub.Option{
		stub.WithOnClose(func() {
			p.log.Write(&Entry{Event: "closed"})
			close(closed)
		}),
		stub.WithTTRPCOptions(
			[]ttrpc.ClientOpts{ttrpc.WithUnaryClientInterceptor(p.clientInterceptor)},
			[]ttrpc.ServerOpt{ttrpc.WithChainUnaryServerInterceptor(serverInterceptors...)},
		),
	}
	preLaunched := os.Getenv(api.PluginSocketEnvVar) != ""
	if *name != "" && !preLaunched {
		opts = append(opts, stub.WithPluginName(*name))
	}
	if *idx != "" && os.Getenv(api.PluginIdxEnvVar) == "" {
		opts = append(opts, stub.WithPluginIdx(*idx))
	}
	if *socketPath != "" {
		opts = append(opts, stub.WithSocketPath(*socketPath))
	}
	opts = append(opts, versionOptions(cfg)...)

	p.stub, err = stub.New(p, opts...)
	if err != nil {
		p.log.Write(&Entry{Event: "error", Error: "create stub: " + err.Error()})
		fmt.Fprintln(os.Stderr, progName+": create stub:", err)
		os.Exit(1)
	}

	ctx := context.Background()
	if err := p.stub.Start(ctx); err != nil {
		p.log.Write(&Entry{Event: "error", Error: "start: " + err.Error()})
		fmt.Fprintln(os.Stderr, progName+": start:", err)
		os.Exit(1)
	}
	p.trigger("")
	p.stub.Wait()
	select {
	case <-closed:
	case <-time.After(time.Second):
	}
	p.log.Write(&Entry{Event: "exit"})
}

// enter runs the common part of every handler: log the event, honour the
// configured exit/delay, fire unsolicited updates bound to the event, and
// return the configured error.
func (p *plugin) enter(ctx context.Context, e *Entry) error {
	e.RPC = rpcOf(ctx)
	p.traceOf(ctx, e)
	p.log.Write(e)
	if code, ok := p.cfg.Exit[e.Event]; ok {
		os.Exit(code)
	}
	if d := p.cfg.DelayMs[e.Event]; d > 0 {
		time.Sleep(time.Duration(d) * time.Millisecond)
	}
	p.trigger(e.Event)
	if msg, ok := p.cfg.errorFor(e.Event, e.subject()); ok {
		if name, ok := p.cfg.ErrorCode[e.Event]; ok {
			return status.Error(codeNamed(name), msg)
		}
		return errors.New(msg)
	}
	return nil
}

// codeNamed is the status code whose Go name is name (Unknown if none).
func codeNamed(name string) codes.Code {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if c.String() == name {
			return c
		}
	}
	return codes.Unknown
}

// trigger starts the unsolicited update requests bound to an event.
func (p *plugin) trigger(event string) {
	for i := range p.cfg.Unsolicited {
		u := &p.cfg.Unsolicited[i]
		if u.AfterEvent != event {
			continue
		}
		p.firedMu.Lock()
		done := p.fired[i]
		p.fired[i] = true
		p.firedMu.Unlock()
		if done {
			continue
		}
		go p.sendUnsolicited(u)
	}
}

func (p *plugin) sendUnsolicited(u *Unsolicited) {
	time.Sleep(time.Duration(u.AfterMs) * time.Millisecond)
	if u.EveryMs <= 0 {
		p.sendOne(u)
		return
	}
	ticker := time.NewTicker(time.Duration(u.EveryMs) * time.Millisecond)
	defer ticker.Stop()
	for range ticker.C {
		p.sendOne(u)
	}
}

func (p *plugin) sendOne(u *Unsolicited) {
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	p.evictMu.Lock()
	p.pendingEvict = u.Evict
	p.evictMu.Unlock()
	failed, err := p.stub.UpdateContainers(u.Updates)
	e := &Entry{Event: "UpdateContainers", Updates: u.Updates, Failed: failed}
	if err != nil {
		e.Error = err.Error()
	}
	p.log.Write(e)
}

func (p *plugin) Configure(ctx context.Context, config, runtime, version string) (stub.EventMask, error) {
	// A JSON object in the runtime-supplied configuration (the drop-in file
	// of a pre-launched plugin) replaces the command-line configuration.
	if strings.HasPrefix(strings.TrimSpace(config), "{") {
		cfg, err := parseConfig("from runtime", []byte(config))
		if err != nil {
			return 0, err
		}
		if err := p.log.OpenFile(cfg.Log); err != nil {
			return 0, err
		}
		p.cfg = cfg
	}
	e := &Entry{
		Event: "Configure", Config: &config, Runtime: runtime, Version: version,
		NRIVersion: runtimeNRIVersion(p.stub),
		RegTimeout: p.stub.RegistrationTimeout().Milliseconds(),
		ReqTimeout: p.stub.RequestTimeout().Milliseconds(),
	}
	if err := p.enter(ctx, e); err != nil {
		return 0, err
	}
	if len(p.cfg.Events) == 0 {
		return 0, nil
	}
	return api.ParseEventMask(p.cfg.Events...)
}

func (p *plugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	if err := p.enter(ctx, &Entry{Event: "Synchronize", Pods: pods, Containers: ctrs}); err != nil {
		return nil, err
	}
	return p.cfg.updates("Synchronize", nil), nil
}

func (p *plugin) Shutdown(ctx context.Context) {
	_ = p.enter(ctx, &Entry{Event: "Shutdown"})
}

func (p *plugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return p.enter(ctx, &Entry{Event: "RunPodSandbox", Pod: pod})
}

func (p *plugin) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return p.enter(ctx, &Entry{Event: "StopPodSandbox", Pod: pod})
}

func (p *plugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return p.enter(ctx, &Entry{Event: "RemovePodSandbox", Pod: pod})
}

func (p *plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	setEvictTarget(ctx, ctr)
	if err := p.enter(ctx, &Entry{Event: "CreateContainer", Pod: pod, Container: ctr}); err != nil {
		return nil, nil, err
	}
	return p.cfg.adjust(ctr), p.cfg.updates("CreateContainer", ctr), nil
}

func (p *plugin) PostCreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.enter(ctx, &Entry{Event: "PostCreateContainer", Pod: pod, Container: ctr})
}

func (p *plugin) StartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.enter(ctx, &Entry{Event: "StartContainer", Pod: pod, Container: ctr})
}

func (p *plugin) PostStartContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.enter(ctx, &Entry{Event: "PostStartContainer", Pod: pod, Container: ctr})
}

func (p *plugin) UpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, res *api.LinuxResources) ([]*api.ContainerUpdate, error) {
	setEvictTarget(ctx, ctr)
	if err := p.enter(ctx, &Entry{Event: "UpdateContainer", Pod: pod, Container: ctr, Resources: res}); err != nil {
		return nil, err
	}
	return p.cfg.updates("UpdateContainer", ctr), nil
}

func (p *plugin) PostUpdateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.enter(ctx, &Entry{Event: "PostUpdateContainer", Pod: pod, Container: ctr})
}

func (p *plugin) StopContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) ([]*api.ContainerUpdate, error) {
	if err := p.enter(ctx, &Entry{Event: "StopContainer", Pod: pod, Container: ctr}); err != nil {
		return nil, err
	}
	return p.cfg.updates("StopContainer", ctr), nil
}

func (p *plugin) RemoveContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) error {
	return p.enter(ctx, &Entry{Event: "RemoveContainer", Pod: pod, Container: ctr})
}
