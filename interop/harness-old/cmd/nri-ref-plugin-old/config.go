package main

import (
	"github.com/containerd/nri/pkg/api"
	"nri-rs.dev/interop/harness-shared/refplugin"
)

// Config drives the behaviour of the reference plugin (refplugin.Common,
// the part shared with nri-ref-plugin, and the unsolicited updates).
type Config struct {
	refplugin.Common
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

func loadConfig(path string) (*Config, error) { return refplugin.LoadJSON[Config](path) }

func parseConfig(origin string, data []byte) (*Config, error) {
	return refplugin.ParseJSON[Config](origin, data)
}
