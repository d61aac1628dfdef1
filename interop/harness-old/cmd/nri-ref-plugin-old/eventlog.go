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
	RPC        string                 `json:"rpc,omitempty"`
	Pod        *api.PodSandbox        `json:"pod,omitempty"`
	Container  *api.Container         `json:"container,omitempty"`
	Resources  *api.LinuxResources    `json:"resources,omitempty"`
	Overhead   *api.LinuxResources    `json:"overhead_resources,omitempty"`
	Config     *string                `json:"config,omitempty"`
	Runtime    string                 `json:"runtime,omitempty"`
	Version    string                 `json:"version,omitempty"`
	RegTimeout int64                  `json:"registration_timeout_ms,omitempty"`
	ReqTimeout int64                  `json:"request_timeout_ms,omitempty"`
	Pods       []*api.PodSandbox      `json:"pods,omitempty"`
	Containers []*api.Container       `json:"containers,omitempty"`
	Updates    []*api.ContainerUpdate `json:"updates,omitempty"`
	Failed     []*api.ContainerUpdate `json:"failed,omitempty"`
	Error      string                 `json:"error,omitempty"`
}

// eventLog is the plugin's event log.
type eventLog = refplugin.Log

func openLog(path string) (*eventLog, error) { return refplugin.Open(path) }

// serverInterceptor tags the context with the ttRPC method name and adds
// the configured evictions to CreateContainer/UpdateContainer responses.
func (p *plugin) serverInterceptor(ctx context.Context, unmarshal ttrpc.Unmarshaler,
	info *ttrpc.UnaryServerInfo, method ttrpc.Method) (interface{}, error) {
	rpl, err := method(refplugin.WithRPC(ctx, info.FullMethod), unmarshal)
	if err != nil {
		return rpl, err
	}
	switch r := rpl.(type) {
	case *api.CreateContainerResponse:
		r.Evict = append(r.Evict, p.cfg.Evict["CreateContainer"]...)
	case *api.UpdateContainerResponse:
		r.Evict = append(r.Evict, p.cfg.Evict["UpdateContainer"]...)
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
