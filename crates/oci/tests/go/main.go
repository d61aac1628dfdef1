// Command nri-oci-reference applies NRI container adjustments and updates to
// OCI runtime specs with the reference Go generator
// (github.com/containerd/nri/pkg/runtime-tools/generate), for differential
// testing of the nri-oci crate.
//
// Input (stdin): {"cases": [case...]}; output (stdout): {"results": [result...]},
// one result per case, in order. See the crate's tests/go_differential.rs.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/runtime-tools/generate"
	rspec "github.com/opencontainers/runtime-spec/specs-go"
)

type options struct {
	// Block I/O classes known to the resolver; nil: no resolver.
	BlockIOClasses map[string]*rspec.LinuxBlockIO `json:"blockio_classes"`
	// RDT classes known to the resolver; nil: no resolver.
	RdtClasses map[string]*rspec.LinuxIntelRdt `json:"rdt_classes"`
	// If positive, a resource checker rejects memory limits above it.
	MaxMemory int64 `json:"max_memory"`
	// Install a CDI injector that records the device names in an annotation.
	CDI bool `json:"cdi"`
	// Install an annotation filter (drops "drop." keys, rejects "bad." keys).
	AnnotationFilter bool `json:"annotation_filter"`
}

type testCase struct {
	Name    string                   `json:"name"`
	Spec    json.RawMessage          `json:"spec"`
	Adjust  *api.ContainerAdjustment `json:"adjust"`
	Updates []*api.ContainerUpdate   `json:"updates"`
	Options options                  `json:"options"`
}

type result struct {
	Name  string      `json:"name"`
	Base  *rspec.Spec `json:"base"`
	Spec  *rspec.Spec `json:"spec"`
	Error string      `json:"error"`
}

func main() {
	var input struct {
		Cases []testCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&input); err != nil {
		fmt.Fprintf(os.Stderr, "failed to decode input: %v\n", err)
		os.Exit(2)
	}
	out := struct {
		Results []result `json:"results"`
	}{Results: []result{}}
	for _, c := range input.Cases {
		out.Results = append(out.Results, run(c))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintf(os.Stderr, "failed to encode output: %v\n", err)
		os.Exit(2)
	}
}

func decodeSpec(raw json.RawMessage) (*rspec.Spec, error) {
	spec := &rspec.Spec{}
	if err := json.Unmarshal(raw, spec); err != nil {
		return nil, err
	}
	return spec, nil
}

func run(c testCase) (res result) {
	res.Name = c.Name
	base, err := decodeSpec(c.Spec)
	if err != nil {
		res.Error = "bad spec: " + err.Error()
		return res
	}
	res.Base = base
	spec, _ := decodeSpec(c.Spec)
	res.Spec = spec

	defer func() {
		if p := recover(); p != nil {
			res.Error = fmt.Sprintf("panic: %v", p)
		}
	}()

	g := generate.SpecGenerator(&specGen{spec: spec}, generatorOptions(c.Options)...)
	if err := g.Adjust(c.Adjust); err != nil {
		res.Error = err.Error()
		return res
	}
	for _, u := range c.Updates {
		r := u.GetLinux().GetResources()
		if err := g.AdjustResources(r); err != nil {
			res.Error = err.Error()
			return res
		}
		if err := g.AdjustBlockIOClass(r.GetBlockioClass().Get()); err != nil {
			res.Error = err.Error()
			return res
		}
		if err := g.AdjustRdtClass(r.GetRdtClass().Get()); err != nil {
			res.Error = err.Error()
			return res
		}
	}
	return res
}

func generatorOptions(o options) []generate.GeneratorOption {
	var opts []generate.GeneratorOption
	if o.BlockIOClasses != nil {
		classes := o.BlockIOClasses
		opts = append(opts, generate.WithBlockIOResolver(func(class string) (*rspec.LinuxBlockIO, error) {
			if b, ok := classes[class]; ok {
				return b, nil
			}
			return nil, fmt.Errorf("unknown block I/O class %q", class)
		}))
	}
	if o.RdtClasses != nil {
		classes := o.RdtClasses
		opts = append(opts, generate.WithRdtResolver(func(class string) (*rspec.LinuxIntelRdt, error) {
			if r, ok := classes[class]; ok {
				return r, nil
			}
			return nil, fmt.Errorf("unknown RDT class %q", class)
		}))
	}
	if o.MaxMemory > 0 {
		maxMem := o.MaxMemory
		opts = append(opts, generate.WithResourceChecker(func(r *rspec.LinuxResources) error {
			if r != nil && r.Memory != nil && r.Memory.Limit != nil && *r.Memory.Limit > maxMem {
				return fmt.Errorf("memory limit %d exceeds %d", *r.Memory.Limit, maxMem)
			}
			return nil
		}))
	}
	if o.CDI {
		opts = append(opts, generate.WithCDIDeviceInjector(func(s *rspec.Spec, names []string) error {
			for _, n := range names {
				if strings.HasPrefix(n, "fail/") {
					return fmt.Errorf("unresolvable CDI devices %s", n)
				}
			}
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations["cdi.test/devices"] = strings.Join(names, ",")
			return nil
		}))
	}
	if o.AnnotationFilter {
		opts = append(opts, generate.WithAnnotationFilter(func(in map[string]string) (map[string]string, error) {
			out := map[string]string{}
			for k, v := range in {
				key := strings.TrimPrefix(k, "-")
				switch {
				case strings.HasPrefix(key, "bad."):
					return nil, errors.New("annotation " + fmt.Sprintf("%q", key) + " not allowed")
				case strings.HasPrefix(key, "drop."):
				default:
					out[k] = v
				}
			}
			return out, nil
		}))
	}
	return opts
}
