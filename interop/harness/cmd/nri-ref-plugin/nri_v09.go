//go:build nri_v09

// nri-ref-plugin-old: the parts of nri-ref-plugin that NRI v0.9.0 lacks are
// left out (see nri_v012.go).

package main

import (
	"context"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/containerd/ttrpc"
)

// progName prefixes the program's error messages.
const progName = "nri-ref-plugin-old"

// versionConfig: v0.9.0 has no failure policy and no tracing, so
// "failure_policy" and "trace" are unknown keys.
type versionConfig struct{}

// validateRequest: v0.9.0 knows no ValidateContainerAdjustment; never set.
type validateRequest struct{}

// subject is the container an event is about (nil: none).
func (e *Entry) subject() *api.Container { return e.Container }

func versionOptions(*Config) []stub.Option { return nil }

// runtimeNRIVersion: the v0.9.0 stub is not told the runtime's NRI version.
func runtimeNRIVersion(stub.Stub) string { return "" }

func (p *plugin) tracingInterceptors() ([]ttrpc.UnaryServerInterceptor, func()) {
	return nil, func() {}
}

func (p *plugin) traceOf(context.Context, *Entry) {}
