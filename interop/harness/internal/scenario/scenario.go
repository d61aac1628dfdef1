// Package scenario holds the scenario file format replayed by nri-ref-runtime,
// the in-memory pod/container table, and the JSON output document.
//
// The format is documented in interop/README.md. The Rust side reads and
// writes the same files, so field names here are part of the contract.
package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/api"
)

// Scenario is one runtime scenario: the initial state plus the steps to replay.
type Scenario struct {
	Runtime               Runtime           `json:"runtime"`
	RegistrationTimeoutMs int64             `json:"registration_timeout_ms,omitempty"`
	RequestTimeoutMs      int64             `json:"request_timeout_ms,omitempty"`
	Pods                  []*api.PodSandbox `json:"pods,omitempty"`
	Containers            []*api.Container  `json:"containers,omitempty"`
	FailUpdates           []string          `json:"fail_updates,omitempty"`
	// Trace installs containerd's otelttrpc client interceptor (W3C trace
	// context in the ttRPC metadata) with an OpenTelemetry SDK tracer and
	// runs every step in a span of its own; the step result records the
	// step's trace id.
	Trace bool   `json:"trace,omitempty"`
	Steps []Step `json:"steps"`
}

// Runtime names the runtime reported to plugins in Configure.
type Runtime struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Step is one replayed operation.
type Step struct {
	Op                     string              `json:"op"`
	Pod                    string              `json:"pod,omitempty"`
	Container              string              `json:"container,omitempty"`
	Count                  int                 `json:"count,omitempty"`
	TimeoutMs              int64               `json:"timeout_ms,omitempty"`
	Ms                     int64               `json:"ms,omitempty"`
	LinuxResources         *api.LinuxResources `json:"linux_resources,omitempty"`
	OverheadLinuxResources *api.LinuxResources `json:"overhead_linux_resources,omitempty"`
}

// Load reads a scenario file (JSON). Unknown fields are rejected so that a
// typo in a test scenario fails loudly instead of being ignored.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	s := &Scenario{}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("parse scenario %s: %w", path, err)
	}
	if s.Runtime.Name == "" {
		s.Runtime.Name = "nri-ref-runtime"
	}
	if s.Runtime.Version == "" {
		s.Runtime.Version = "v0.0.0"
	}
	return s, nil
}

// Created reports the ids of the pods and containers that are created by a
// step (RunPodSandbox, CreateContainer). They join the table only when that
// step runs; every other pod and container is in the table from the start.
func (s *Scenario) Created() (pods, containers map[string]bool) {
	pods = map[string]bool{}
	containers = map[string]bool{}
	for _, st := range s.Steps {
		switch st.Op {
		case "RunPodSandbox":
			pods[st.Pod] = true
		case "CreateContainer":
			containers[st.Container] = true
		}
	}
	return pods, containers
}

// Timeout returns a step's timeout in milliseconds, or def when unset.
func (st *Step) Timeout(def int64) int64 {
	if st.TimeoutMs > 0 {
		return st.TimeoutMs
	}
	return def
}
