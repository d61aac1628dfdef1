// Command nri-min-plugin is the smallest useful plugin on the official stub
// (github.com/containerd/nri/pkg/stub), used by nri-adaptation-bench to
// measure an idle plugin's memory: it answers Synchronize with no updates
// and CreateContainer with one annotation naming itself.
//
//	nri-min-plugin [-config FILE] -name NAME -idx NN -socket PATH
//
// -config is accepted (and ignored) so that the bench can start it with
// nri-ref-plugin's command line.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

type plugin struct {
	key string
}

func main() {
	_ = flag.String("config", "", "ignored")
	name := flag.String("name", "min", "plugin name")
	idx := flag.String("idx", "10", "plugin index")
	socket := flag.String("socket", "", "NRI socket")
	flag.Parse()

	p := &plugin{key: "bench.nri.io/plugin-" + *name}
	opts := []stub.Option{stub.WithPluginName(*name), stub.WithPluginIdx(*idx)}
	if *socket != "" {
		opts = append(opts, stub.WithSocketPath(*socket))
	}
	s, err := stub.New(p, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-min-plugin:", err)
		os.Exit(1)
	}
	if err := s.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "nri-min-plugin:", err)
		os.Exit(1)
	}
}

func (p *plugin) Synchronize(_ context.Context, _ []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	return nil, nil
}

func (p *plugin) CreateContainer(_ context.Context, _ *api.PodSandbox, _ *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adjust := &api.ContainerAdjustment{}
	adjust.AddAnnotation(p.key, "on")
	return adjust, nil, nil
}
