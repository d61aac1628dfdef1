package refplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/api"
)

// Common is the part of the reference plugins' configuration that both NRI
// versions understand; each plugin's Config embeds it. Every map is keyed by
// event name as spelled by the NRI API (e.g. "CreateContainer",
// "Synchronize", "Configure").
type Common struct {
	// Events to subscribe to (names accepted by api.ParseEventMask).
	// Empty: answer 0, i.e. everything the plugin implements.
	Events []string `json:"events,omitempty"`
	// Log is the JSON-lines event log (the -log flag wins).
	Log string `json:"log,omitempty"`
	// Adjust is the adjustment returned from CreateContainer.
	Adjust *api.ContainerAdjustment `json:"adjust,omitempty"`
	// Update holds the updates returned per event (Synchronize,
	// CreateContainer, UpdateContainer, StopContainer).
	Update map[string][]*api.ContainerUpdate `json:"update,omitempty"`
	// Evict holds the evictions returned per event (CreateContainer,
	// UpdateContainer). The Go stub has no API for them; they are added to
	// the response by a ttRPC server interceptor.
	Evict map[string][]*api.ContainerEviction `json:"evict,omitempty"`
	// Error makes the handler of an event fail with the given message.
	Error map[string]string `json:"error,omitempty"`
	// DelayMs delays the handler of an event before it answers.
	DelayMs map[string]int64 `json:"delay_ms,omitempty"`
	// Exit makes the process exit with the given code on receiving an event
	// (before answering), simulating a crash.
	Exit map[string]int `json:"exit,omitempty"`
	// Reject makes ValidateContainerAdjustment reject with Reason (v0.9.0
	// knows no ValidateContainerAdjustment and only accepts them).
	Reject bool   `json:"reject,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// LoadJSON reads the configuration file at path into a new T (an empty one
// for ""), refusing unknown fields.
func LoadJSON[T any](path string) (*T, error) {
	if path == "" {
		return new(T), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return ParseJSON[T](path, data)
}

// ParseJSON decodes a configuration from origin (a path, or "from runtime")
// into a new T, refusing unknown fields.
func ParseJSON[T any](origin string, data []byte) (*T, error) {
	cfg := new(T)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("parse config %s: %w", origin, err)
	}
	return cfg, nil
}
