package main

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"nri-rs.dev/interop/harness-shared/refplugin"
)

// Entry is one line of the event log.
type Entry struct {
	Event string `json:"event"`
	// RPC is the ttRPC method that delivered the event (e.g. "StateChange"
	// when an old runtime uses the generic notification).
	RPC        string                                  `json:"rpc,omitempty"`
	Pod        *api.PodSandbox                         `json:"pod,omitempty"`
	Container  *api.Container                          `json:"container,omitempty"`
	Resources  *api.LinuxResources                     `json:"resources,omitempty"`
	Overhead   *api.LinuxResources                     `json:"overhead_resources,omitempty"`
	Config     *string                                 `json:"config,omitempty"`
	Runtime    string                                  `json:"runtime,omitempty"`
	Version    string                                  `json:"version,omitempty"`
	NRIVersion string                                  `json:"nri_version,omitempty"`
	RegTimeout int64                                   `json:"registration_timeout_ms,omitempty"`
	ReqTimeout int64                                   `json:"request_timeout_ms,omitempty"`
	Pods       []*api.PodSandbox                       `json:"pods,omitempty"`
	Containers []*api.Container                        `json:"containers,omitempty"`
	Validate   *api.ValidateContainerAdjustmentRequest `json:"validate,omitempty"`
	Updates    []*api.ContainerUpdate                  `json:"updates,omitempty"`
	Failed     []*api.ContainerUpdate                  `json:"failed,omitempty"`
	Error      string                                  `json:"error,omitempty"`
	// TraceID and ParentSpanID: the trace of the handler's span and the
	// remote span it continues (with "trace" in the configuration).
	TraceID      string `json:"trace_id,omitempty"`
	ParentSpanID string `json:"parent_span_id,omitempty"`
}

// eventLog is the plugin's event log.
type eventLog = refplugin.Log

func openLog(path string) (*eventLog, error) { return refplugin.Open(path) }

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
	ctx = context.WithValue(refplugin.WithRPC(ctx, info.FullMethod), evictTargetKey{}, target)
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

// clientInterceptor adds the pending evictions (set by sendUnsolicited) to
// an UpdateContainers request; the Go stub has no API for them.
func (p *plugin) clientInterceptor(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response,
	info *ttrpc.UnaryClientInfo, invoker ttrpc.Invoker) error {
	refplugin.AddEvictions(req, info, func() []*api.ContainerEviction {
		p.evictMu.Lock()
		defer p.evictMu.Unlock()
		ev := p.pendingEvict
		p.pendingEvict = nil
		return ev
	})
	return invoker(ctx, req, resp)
}
