//go:build wasip1

// Command nri-wasm-scripted is a WebAssembly NRI plugin for the interop
// tests. Its configuration (the conf.d file) is JSON: {"tag": "..."}.
// What it does with a container depends on the container's name:
//
//   - "...fail...":   CreateContainer returns an error;
//   - "...hang...":   CreateContainer never returns (a busy loop);
//   - "...trap...":   CreateContainer panics (Go's runtime then traps);
//   - "...reject...": CreateContainer marks the adjustment and
//     ValidateContainerAdjustment rejects it;
//   - anything else:  CreateContainer adjusts an annotation, an environment
//     variable (with the configured tag), a mount and CPU and memory
//     resources.
//
// UpdateContainer asks for an update of the CPU shares of container
// "ctr1"; StopContainer for another one.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/containerd/nri/pkg/api"
)

const rejectKey = "nri-wasm/reject"

type config struct {
	Tag string `json:"tag"`
}

type scripted struct {
	host api.HostFunctions
	cfg  config
}

func (s *scripted) logf(level api.LogRequest_Level, format string, args ...any) {
	s.host.Log(context.Background(), &api.LogRequest{Msg: fmt.Sprintf(format, args...), Level: level})
}

func (s *scripted) Configure(_ context.Context, req *api.ConfigureRequest) (*api.ConfigureResponse, error) {
	if req.GetConfig() != "" {
		if err := json.Unmarshal([]byte(req.GetConfig()), &s.cfg); err != nil {
			return nil, fmt.Errorf("nri-wasm-scripted: bad configuration: %w", err)
		}
	}
	s.logf(api.LogRequest_LEVEL_INFO, "nri-wasm-scripted: configured with tag %q", s.cfg.Tag)
	return &api.ConfigureResponse{}, nil
}

func (s *scripted) Synchronize(_ context.Context, req *api.SynchronizeRequest) (*api.SynchronizeResponse, error) {
	s.logf(api.LogRequest_LEVEL_DEBUG, "nri-wasm-scripted: synchronized %d pods", len(req.GetPods()))
	return &api.SynchronizeResponse{}, nil
}

func (s *scripted) Shutdown(context.Context, *api.Empty) (*api.Empty, error) {
	return &api.Empty{}, nil
}

func (s *scripted) RunPodSandbox(context.Context, *api.RunPodSandboxRequest) (*api.RunPodSandboxResponse, error) {
	return &api.RunPodSandboxResponse{}, nil
}

func (s *scripted) UpdatePodSandbox(context.Context, *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error) {
	return &api.UpdatePodSandboxResponse{}, nil
}

func (s *scripted) PostUpdatePodSandbox(context.Context, *api.PostUpdatePodSandboxRequest) (*api.PostUpdatePodSandboxResponse, error) {
	return &api.PostUpdatePodSandboxResponse{}, nil
}

func (s *scripted) StopPodSandbox(context.Context, *api.StopPodSandboxRequest) (*api.StopPodSandboxResponse, error) {
	return &api.StopPodSandboxResponse{}, nil
}

func (s *scripted) RemovePodSandbox(context.Context, *api.RemovePodSandboxRequest) (*api.RemovePodSandboxResponse, error) {
	return &api.RemovePodSandboxResponse{}, nil
}

// spin never returns; the host has to interrupt it.
func spin() int {
	n := 0
	for {
		n++
	}
}

func (s *scripted) CreateContainer(_ context.Context, req *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
	name := req.GetContainer().GetName()
	adjust := &api.ContainerAdjustment{}
	switch {
	case strings.Contains(name, "fail"):
		s.logf(api.LogRequest_LEVEL_WARN, "nri-wasm-scripted: failing %s", name)
		return nil, fmt.Errorf("nri-wasm-scripted: refusing to create %s", name)
	case strings.Contains(name, "hang"):
		s.logf(api.LogRequest_LEVEL_WARN, "nri-wasm-scripted: hanging on %s", name)
		spin()
	case strings.Contains(name, "trap"):
		s.logf(api.LogRequest_LEVEL_ERROR, "nri-wasm-scripted: trapping on %s", name)
		panic("nri-wasm-scripted: trap requested by " + name)
	case strings.Contains(name, "reject"):
		adjust.AddAnnotation(rejectKey, name)
	default:
		adjust.AddAnnotation("nri-wasm/adjusted", name)
		adjust.AddEnv("NRI_WASM_TAG", s.cfg.Tag)
		adjust.AddMount(&api.Mount{
			Destination: "/nri-wasm",
			Source:      "/tmp/nri-wasm",
			Type:        "bind",
			Options:     []string{"rbind", "ro"},
		})
		adjust.SetLinuxCPUShares(123)
		adjust.SetLinuxMemoryLimit(256 << 20)
	}
	return &api.CreateContainerResponse{Adjust: adjust}, nil
}

func (s *scripted) PostCreateContainer(context.Context, *api.PostCreateContainerRequest) (*api.PostCreateContainerResponse, error) {
	return &api.PostCreateContainerResponse{}, nil
}

func (s *scripted) StartContainer(context.Context, *api.StartContainerRequest) (*api.StartContainerResponse, error) {
	return &api.StartContainerResponse{}, nil
}

func (s *scripted) PostStartContainer(context.Context, *api.PostStartContainerRequest) (*api.PostStartContainerResponse, error) {
	return &api.PostStartContainerResponse{}, nil
}

func update(id string, shares uint64) *api.ContainerUpdate {
	u := &api.ContainerUpdate{}
	u.SetContainerId(id)
	u.SetLinuxCPUShares(shares)
	return u
}

func (s *scripted) UpdateContainer(context.Context, *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
	return &api.UpdateContainerResponse{Update: []*api.ContainerUpdate{update("ctr1", 77)}}, nil
}

func (s *scripted) PostUpdateContainer(context.Context, *api.PostUpdateContainerRequest) (*api.PostUpdateContainerResponse, error) {
	return &api.PostUpdateContainerResponse{}, nil
}

func (s *scripted) StopContainer(context.Context, *api.StopContainerRequest) (*api.StopContainerResponse, error) {
	return &api.StopContainerResponse{Update: []*api.ContainerUpdate{update("ctr1", 88)}}, nil
}

func (s *scripted) RemoveContainer(context.Context, *api.RemoveContainerRequest) (*api.RemoveContainerResponse, error) {
	return &api.RemoveContainerResponse{}, nil
}

func (s *scripted) StateChange(context.Context, *api.StateChangeEvent) (*api.Empty, error) {
	return &api.Empty{}, nil
}

func (s *scripted) ValidateContainerAdjustment(_ context.Context, req *api.ValidateContainerAdjustmentRequest) (*api.ValidateContainerAdjustmentResponse, error) {
	if who := req.GetAdjust().GetAnnotations()[rejectKey]; who != "" {
		return &api.ValidateContainerAdjustmentResponse{
			Reject: true,
			Reason: "nri-wasm-scripted: rejecting the adjustment of " + who,
		}, nil
	}
	return &api.ValidateContainerAdjustmentResponse{}, nil
}

func init() {
	api.RegisterPlugin(&scripted{host: api.NewHostFunctions()})
}

func main() {}
