//go:build wasip1

// Command nri-wasm-logger is a WebAssembly NRI plugin that logs every
// request it gets through the host's log function and changes nothing.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o logger.wasm ./cmd/nri-wasm-logger
package main

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"
)

type logger struct {
	host api.HostFunctions
}

func (l *logger) log(event string, detail string) {
	l.host.Log(context.Background(), &api.LogRequest{
		Msg:   fmt.Sprintf("nri-wasm-logger: %s %s", event, detail),
		Level: api.LogRequest_LEVEL_INFO,
	})
}

func ctrName(c *api.Container) string {
	if c == nil {
		return "-"
	}
	return c.GetName()
}

func podName(p *api.PodSandbox) string {
	if p == nil {
		return "-"
	}
	return p.GetName()
}

func (l *logger) Configure(_ context.Context, req *api.ConfigureRequest) (*api.ConfigureResponse, error) {
	l.log("Configure", fmt.Sprintf("runtime=%s/%s config=%q", req.GetRuntimeName(), req.GetRuntimeVersion(), req.GetConfig()))
	// No events: subscribe to everything.
	return &api.ConfigureResponse{}, nil
}

func (l *logger) Synchronize(_ context.Context, req *api.SynchronizeRequest) (*api.SynchronizeResponse, error) {
	l.log("Synchronize", fmt.Sprintf("pods=%d containers=%d", len(req.GetPods()), len(req.GetContainers())))
	return &api.SynchronizeResponse{}, nil
}

func (l *logger) Shutdown(context.Context, *api.Empty) (*api.Empty, error) {
	l.log("Shutdown", "")
	return &api.Empty{}, nil
}

func (l *logger) RunPodSandbox(_ context.Context, req *api.RunPodSandboxRequest) (*api.RunPodSandboxResponse, error) {
	l.log("RunPodSandbox", podName(req.GetPod()))
	return &api.RunPodSandboxResponse{}, nil
}

func (l *logger) UpdatePodSandbox(_ context.Context, req *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error) {
	l.log("UpdatePodSandbox", podName(req.GetPod()))
	return &api.UpdatePodSandboxResponse{}, nil
}

func (l *logger) PostUpdatePodSandbox(_ context.Context, req *api.PostUpdatePodSandboxRequest) (*api.PostUpdatePodSandboxResponse, error) {
	l.log("PostUpdatePodSandbox", podName(req.GetPod()))
	return &api.PostUpdatePodSandboxResponse{}, nil
}

func (l *logger) StopPodSandbox(_ context.Context, req *api.StopPodSandboxRequest) (*api.StopPodSandboxResponse, error) {
	l.log("StopPodSandbox", podName(req.GetPod()))
	return &api.StopPodSandboxResponse{}, nil
}

func (l *logger) RemovePodSandbox(_ context.Context, req *api.RemovePodSandboxRequest) (*api.RemovePodSandboxResponse, error) {
	l.log("RemovePodSandbox", podName(req.GetPod()))
	return &api.RemovePodSandboxResponse{}, nil
}

func (l *logger) CreateContainer(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
	l.log("CreateContainer", ctrName(req.GetContainer()))
	return &api.CreateContainerResponse{}, nil
}

func (l *logger) PostCreateContainer(_ context.Context, req *api.PostCreateContainerRequest) (*api.PostCreateContainerResponse, error) {
	l.log("PostCreateContainer", ctrName(req.GetContainer()))
	return &api.PostCreateContainerResponse{}, nil
}

func (l *logger) StartContainer(_ context.Context, req *api.StartContainerRequest) (*api.StartContainerResponse, error) {
	l.log("StartContainer", ctrName(req.GetContainer()))
	return &api.StartContainerResponse{}, nil
}

func (l *logger) PostStartContainer(_ context.Context, req *api.PostStartContainerRequest) (*api.PostStartContainerResponse, error) {
	l.log("PostStartContainer", ctrName(req.GetContainer()))
	return &api.PostStartContainerResponse{}, nil
}

func (l *logger) UpdateContainer(_ context.Context, req *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
	l.log("UpdateContainer", ctrName(req.GetContainer()))
	return &api.UpdateContainerResponse{}, nil
}

func (l *logger) PostUpdateContainer(_ context.Context, req *api.PostUpdateContainerRequest) (*api.PostUpdateContainerResponse, error) {
	l.log("PostUpdateContainer", ctrName(req.GetContainer()))
	return &api.PostUpdateContainerResponse{}, nil
}

func (l *logger) StopContainer(_ context.Context, req *api.StopContainerRequest) (*api.StopContainerResponse, error) {
	l.log("StopContainer", ctrName(req.GetContainer()))
	return &api.StopContainerResponse{}, nil
}

func (l *logger) RemoveContainer(_ context.Context, req *api.RemoveContainerRequest) (*api.RemoveContainerResponse, error) {
	l.log("RemoveContainer", ctrName(req.GetContainer()))
	return &api.RemoveContainerResponse{}, nil
}

func (l *logger) StateChange(_ context.Context, req *api.StateChangeEvent) (*api.Empty, error) {
	l.log("StateChange", req.GetEvent().String())
	return &api.Empty{}, nil
}

func (l *logger) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) (*api.ValidateContainerAdjustmentResponse, error) {
	l.log("ValidateContainerAdjustment", ctrName(req.GetContainer()))
	return &api.ValidateContainerAdjustmentResponse{}, nil
}

// A reactor module: main is never called; the plugin registers itself
// when the host runs _initialize.
func init() {
	api.RegisterPlugin(&logger{host: api.NewHostFunctions()})
}

func main() {}
