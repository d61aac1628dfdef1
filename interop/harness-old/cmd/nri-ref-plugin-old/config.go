package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/api"
)

// Config drives the behaviour of the reference plugin. Every map is keyed by
// event name as spelled by the NRI API (e.g. "CreateContainer",
// "Synchronize", "Configure").
type Config struct {
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
	// Reject and Reason are accepted for configurations shared with
	// nri-ref-plugin; v0.9.0 knows no ValidateContainerAdjustment.
	Reject bool   `json:"reject,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Unsolicited container update requests sent to the runtime.
	Unsolicited []Unsolicited `json:"unsolicited,omitempty"`
}

// Unsolicited is one UpdateContainers call made by the plugin on its own.
type Unsolicited struct {
	// AfterEvent: fire after the handler of this event ran once ("" = after
	// the plugin has started, i.e. after Configure).
	AfterEvent string `json:"after_event,omitempty"`
	// AfterMs: delay after the trigger.
	AfterMs int64 `json:"after_ms,omitempty"`
	// Updates to request.
	Updates []*api.ContainerUpdate `json:"updates,omitempty"`
	// Evict is added to the request by a ttRPC client interceptor (the Go
	// stub cannot send evictions).
	Evict []*api.ContainerEviction `json:"evict,omitempty"`
}

func loadConfig(path string) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parseConfig(path, data)
}

func parseConfig(origin string, data []byte) (*Config, error) {
	cfg := &Config{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("parse config %s: %w", origin, err)
	}
	return cfg, nil
}
