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
	// ErrorCode is the status code (its Go name, e.g. "DeadlineExceeded")
	// of an event's Error; without one the stub answers Unknown.
	ErrorCode map[string]string `json:"error_code,omitempty"`
	// DelayMs delays the handler of an event before it answers.
	DelayMs map[string]int64 `json:"delay_ms,omitempty"`
	// Exit makes the process exit with the given code on receiving an event
	// (before answering), simulating a crash.
	Exit map[string]int `json:"exit,omitempty"`
	// Reject makes ValidateContainerAdjustment reject with Reason (NRI
	// v0.9.0 knows no ValidateContainerAdjustment: there they are ignored).
	Reject bool   `json:"reject,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Unsolicited container update requests sent to the runtime.
	Unsolicited []Unsolicited `json:"unsolicited,omitempty"`
	// ByContainer overrides the per-event behaviour for events about one
	// container, keyed by container id or name (the id is looked up first).
	// This lets one plugin process answer many independent cases.
	ByContainer map[string]*Behavior `json:"by_container,omitempty"`
	// The keys only one NRI version can honour ("failure_policy", "trace"
	// on v0.12; the build for v0.9.0 refuses them as unknown).
	versionConfig
}

// Behavior is the per-container part of the configuration. A field that is
// present wins over the plugin-wide key of the same name; for the per-event
// maps (update, evict, error) an event key that is present wins (an empty
// list or an empty error text switches the plugin-wide one off).
type Behavior struct {
	Adjust *api.ContainerAdjustment            `json:"adjust,omitempty"`
	Update map[string][]*api.ContainerUpdate   `json:"update,omitempty"`
	Evict  map[string][]*api.ContainerEviction `json:"evict,omitempty"`
	Error  map[string]string                   `json:"error,omitempty"`
	Reject *bool                               `json:"reject,omitempty"`
	Reason *string                             `json:"reason,omitempty"`
}

// behavior returns the override for a container, if any.
func (c *Config) behavior(ctr *api.Container) *Behavior {
	if ctr == nil || len(c.ByContainer) == 0 {
		return nil
	}
	if b, ok := c.ByContainer[ctr.GetId()]; ok {
		return b
	}
	return c.ByContainer[ctr.GetName()]
}

// adjust is the adjustment returned by CreateContainer for ctr.
func (c *Config) adjust(ctr *api.Container) *api.ContainerAdjustment {
	if b := c.behavior(ctr); b != nil && b.Adjust != nil {
		return b.Adjust
	}
	return c.Adjust
}

// updates are the container updates returned for an event about ctr.
func (c *Config) updates(event string, ctr *api.Container) []*api.ContainerUpdate {
	if b := c.behavior(ctr); b != nil {
		if u, ok := b.Update[event]; ok {
			return u
		}
	}
	return c.Update[event]
}

// evictions are the evictions added to the response to an event about ctr.
func (c *Config) evictions(event string, ctr *api.Container) []*api.ContainerEviction {
	if b := c.behavior(ctr); b != nil {
		if e, ok := b.Evict[event]; ok {
			return e
		}
	}
	return c.Evict[event]
}

// errorFor is the error text of the handler of an event about ctr ("" and
// false: no error).
func (c *Config) errorFor(event string, ctr *api.Container) (string, bool) {
	if b := c.behavior(ctr); b != nil {
		if msg, ok := b.Error[event]; ok {
			return msg, msg != ""
		}
	}
	msg, ok := c.Error[event]
	return msg, ok
}

// rejection tells whether ValidateContainerAdjustment rejects ctr, and why.
func (c *Config) rejection(ctr *api.Container) (bool, string) {
	reject, reason := c.Reject, c.Reason
	if b := c.behavior(ctr); b != nil {
		if b.Reject != nil {
			reject = *b.Reject
		}
		if b.Reason != nil {
			reason = *b.Reason
		}
	}
	return reject, reason
}

// Unsolicited is one UpdateContainers call made by the plugin on its own.
type Unsolicited struct {
	// AfterEvent: fire after the handler of this event ran once ("" = after
	// the plugin has started, i.e. after Configure).
	AfterEvent string `json:"after_event,omitempty"`
	// AfterMs: delay after the trigger.
	AfterMs int64 `json:"after_ms,omitempty"`
	// EveryMs: repeat the call this often until the plugin stops (0: once).
	EveryMs int64 `json:"every_ms,omitempty"`
	// Updates to request.
	Updates []*api.ContainerUpdate `json:"updates,omitempty"`
	// Evict is added to the request by a ttRPC client interceptor (the Go
	// stub cannot send evictions).
	Evict []*api.ContainerEviction `json:"evict,omitempty"`
}

// loadConfig reads the configuration file at path (an empty configuration
// for ""), refusing unknown fields.
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

// parseConfig decodes a configuration from origin (a path, or "from
// runtime"), refusing unknown fields.
func parseConfig(origin string, data []byte) (*Config, error) {
	cfg := &Config{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return nil, fmt.Errorf("parse config %s: %w", origin, err)
	}
	return cfg, nil
}
