package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

// Entry is one line of the event log.
type Entry struct {
	Event string `json:"event"`
	// RPC is the ttRPC method that delivered the event (e.g. "StateChange"
	// when an old runtime uses the generic notification).
	RPC        string              `json:"rpc,omitempty"`
	Pod        *api.PodSandbox     `json:"pod,omitempty"`
	Container  *api.Container      `json:"container,omitempty"`
	Resources  *api.LinuxResources `json:"resources,omitempty"`
	Overhead   *api.LinuxResources `json:"overhead_resources,omitempty"`
	Config     *string             `json:"config,omitempty"`
	Runtime    string              `json:"runtime,omitempty"`
	Version    string              `json:"version,omitempty"`
	NRIVersion string              `json:"nri_version,omitempty"`
	RegTimeout int64               `json:"registration_timeout_ms,omitempty"`
	ReqTimeout int64               `json:"request_timeout_ms,omitempty"`
	Pods       []*api.PodSandbox   `json:"pods,omitempty"`
	Containers []*api.Container    `json:"containers,omitempty"`
	// Validate is the request of ValidateContainerAdjustment (v0.12 only).
	Validate *validateRequest       `json:"validate,omitempty"`
	Updates  []*api.ContainerUpdate `json:"updates,omitempty"`
	Failed   []*api.ContainerUpdate `json:"failed,omitempty"`
	Error    string                 `json:"error,omitempty"`
	// TraceID and ParentSpanID: the trace of the handler's span and the
	// remote span it continues (with "trace" in the configuration).
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
}

// eventLog appends JSON lines to a file; safe for concurrent use.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

// openLog opens the log at path ("": a log that writes nothing until
// OpenFile gives it a file).
func openLog(path string) (*eventLog, error) {
	l := &eventLog{}
	if err := l.OpenFile(path); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenFile starts logging to path unless a log file is already open.
func (l *eventLog) OpenFile(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil || path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// Write appends e to the log; without a log file it does nothing, not even
// encode the entry. An entry that does not encode is logged as its event
// with the encoding error.
func (l *eventLog) Write(e *Entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	data, err := json.Marshal(e)
	if err != nil {
		data, _ = json.Marshal(&Entry{Event: e.Event, Error: "log encoding: " + err.Error()})
	}
	_, _ = l.f.Write(append(data, '\n'))
	_ = l.f.Sync()
}

type rpcKey struct{}

// rpcOf is the name of the ttRPC method that delivered the request of ctx
// ("" if none), e.g. "StateChange" when an old runtime uses the generic
// notification.
func rpcOf(ctx context.Context) string {
	if v, ok := ctx.Value(rpcKey{}).(string); ok {
		return v
	}
	return ""
}

// evictTargetKey holds the *evictTarget of a request: the handler of
// CreateContainer/UpdateContainer records the container the event is about,
// so the interceptor can pick its per-container evictions.
type evictTargetKey struct{}

type evictTarget struct {
	ctr *api.Container
}

func setEvictTarget(ctx context.Context, ctr *api.Container) {
	if t, ok := ctx.Value(evictTargetKey{}).(*evictTarget); ok {
		t.ctr = ctr
	}
}

// serverInterceptor tags the context with the ttRPC method name and adds
// the configured evictions to CreateContainer/UpdateContainer responses.
func (p *plugin) serverInterceptor(ctx context.Context, unmarshal ttrpc.Unmarshaler,
	info *ttrpc.UnaryServerInfo, method ttrpc.Method) (interface{}, error) {
	target := &evictTarget{}
	rpc := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	ctx = context.WithValue(context.WithValue(ctx, rpcKey{}, rpc), evictTargetKey{}, target)
	rpl, err := method(ctx, unmarshal)
	if err != nil {
		return rpl, err
	}
	switch r := rpl.(type) {
	case *api.CreateContainerResponse:
		r.Evict = append(r.Evict, p.cfg.evictions("CreateContainer", target.ctr)...)
	case *api.UpdateContainerResponse:
		r.Evict = append(r.Evict, p.cfg.evictions("UpdateContainer", target.ctr)...)
	}
	return rpl, err
}

// clientInterceptor adds the pending evictions (set by sendOne) to an
// UpdateContainers request; the Go stub has no API for them.
func (p *plugin) clientInterceptor(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response,
	info *ttrpc.UnaryClientInfo, invoker ttrpc.Invoker) error {
	if strings.HasSuffix(info.FullMethod, "/UpdateContainers") {
		p.evictMu.Lock()
		ev := p.pendingEvict
		p.pendingEvict = nil
		p.evictMu.Unlock()
		if len(ev) > 0 {
			msg := &api.UpdateContainersRequest{}
			if err := proto.Unmarshal(req.Payload, msg); err == nil {
				msg.Evict = append(msg.Evict, ev...)
				if data, err := proto.Marshal(msg); err == nil {
					req.Payload = data
				}
			}
		}
	}
	return invoker(ctx, req, resp)
}
