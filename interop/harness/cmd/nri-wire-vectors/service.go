package main

import (
	"context"

	"github.com/containerd/nri/pkg/api"
)

// cannedPlugin implements api.PluginService with preset answers: for each
// method either an error, a preset response, or an empty response.
type cannedPlugin struct {
	resp map[string]interface{}
	errs map[string]error
}

func answer[T any](s *cannedPlugin, method string) (*T, error) {
	if err := s.errs[method]; err != nil {
		return nil, err
	}
	if r, ok := s.resp[method].(*T); ok {
		return r, nil
	}
	return new(T), nil
}

func (s *cannedPlugin) Configure(_ context.Context, _ *api.ConfigureRequest) (*api.ConfigureResponse, error) {
	return answer[api.ConfigureResponse](s, "Configure")
}

func (s *cannedPlugin) Synchronize(_ context.Context, _ *api.SynchronizeRequest) (*api.SynchronizeResponse, error) {
	return answer[api.SynchronizeResponse](s, "Synchronize")
}

func (s *cannedPlugin) Shutdown(_ context.Context, _ *api.Empty) (*api.Empty, error) {
	return answer[api.Empty](s, "Shutdown")
}

func (s *cannedPlugin) RunPodSandbox(_ context.Context, _ *api.RunPodSandboxRequest) (*api.RunPodSandboxResponse, error) {
	return answer[api.RunPodSandboxResponse](s, "RunPodSandbox")
}

func (s *cannedPlugin) UpdatePodSandbox(_ context.Context, _ *api.UpdatePodSandboxRequest) (*api.UpdatePodSandboxResponse, error) {
	return answer[api.UpdatePodSandboxResponse](s, "UpdatePodSandbox")
}

func (s *cannedPlugin) PostUpdatePodSandbox(_ context.Context, _ *api.PostUpdatePodSandboxRequest) (*api.PostUpdatePodSandboxResponse, error) {
	return answer[api.PostUpdatePodSandboxResponse](s, "PostUpdatePodSandbox")
}

func (s *cannedPlugin) StopPodSandbox(_ context.Context, _ *api.StopPodSandboxRequest) (*api.StopPodSandboxResponse, error) {
	return answer[api.StopPodSandboxResponse](s, "StopPodSandbox")
}

func (s *cannedPlugin) RemovePodSandbox(_ context.Context, _ *api.RemovePodSandboxRequest) (*api.RemovePodSandboxResponse, error) {
	return answer[api.RemovePodSandboxResponse](s, "RemovePodSandbox")
}

func (s *cannedPlugin) CreateContainer(_ context.Context, _ *api.CreateContainerRequest) (*api.CreateContainerResponse, error) {
	return answer[api.CreateContainerResponse](s, "CreateContainer")
}

func (s *cannedPlugin) PostCreateContainer(_ context.Context, _ *api.PostCreateContainerRequest) (*api.PostCreateContainerResponse, error) {
	return answer[api.PostCreateContainerResponse](s, "PostCreateContainer")
}

func (s *cannedPlugin) StartContainer(_ context.Context, _ *api.StartContainerRequest) (*api.StartContainerResponse, error) {
	return answer[api.StartContainerResponse](s, "StartContainer")
}

func (s *cannedPlugin) PostStartContainer(_ context.Context, _ *api.PostStartContainerRequest) (*api.PostStartContainerResponse, error) {
	return answer[api.PostStartContainerResponse](s, "PostStartContainer")
}

func (s *cannedPlugin) UpdateContainer(_ context.Context, _ *api.UpdateContainerRequest) (*api.UpdateContainerResponse, error) {
	return answer[api.UpdateContainerResponse](s, "UpdateContainer")
}

func (s *cannedPlugin) PostUpdateContainer(_ context.Context, _ *api.PostUpdateContainerRequest) (*api.PostUpdateContainerResponse, error) {
	return answer[api.PostUpdateContainerResponse](s, "PostUpdateContainer")
}

func (s *cannedPlugin) StopContainer(_ context.Context, _ *api.StopContainerRequest) (*api.StopContainerResponse, error) {
	return answer[api.StopContainerResponse](s, "StopContainer")
}

func (s *cannedPlugin) RemoveContainer(_ context.Context, _ *api.RemoveContainerRequest) (*api.RemoveContainerResponse, error) {
	return answer[api.RemoveContainerResponse](s, "RemoveContainer")
}

func (s *cannedPlugin) StateChange(_ context.Context, _ *api.StateChangeEvent) (*api.Empty, error) {
	return answer[api.Empty](s, "StateChange")
}

func (s *cannedPlugin) ValidateContainerAdjustment(_ context.Context, _ *api.ValidateContainerAdjustmentRequest) (*api.ValidateContainerAdjustmentResponse, error) {
	return answer[api.ValidateContainerAdjustmentResponse](s, "ValidateContainerAdjustment")
}
