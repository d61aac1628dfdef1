// Command difftest runs the reference default validator of
// github.com/containerd/nri over a list of cases and prints its verdicts.
//
// Input (stdin): a JSON array of objects {"config": <object>, "request": <object>}.
// The config object is decoded with the YAML field names of the reference
// configuration type; the request with encoding/json.
// Output (stdout): a JSON array of strings, one per case: the error text, or
// "" when the request was accepted, or "PANIC: <value>" when the reference
// panicked.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/log"
	validator "github.com/containerd/nri/plugins/default-validator"
	yaml "go.yaml.in/yaml/v3"
)

type testCase struct {
	Config  json.RawMessage `json:"config"`
	Request json.RawMessage `json:"request"`
}

func run(c testCase) (verdict string) {
	defer func() {
		if r := recover(); r != nil {
			verdict = fmt.Sprintf("PANIC: %v", r)
		}
	}()

	cfg := validator.DefaultValidatorConfig{}
	if len(c.Config) > 0 {
		if err := yaml.Unmarshal(c.Config, &cfg); err != nil {
			return "BAD CONFIG: " + err.Error()
		}
	}
	req := &api.ValidateContainerAdjustmentRequest{}
	if err := json.Unmarshal(c.Request, req); err != nil {
		return "BAD REQUEST: " + err.Error()
	}

	v := validator.NewDefaultValidator(&cfg)
	if err := v.ValidateContainerAdjustment(context.Background(), req); err != nil {
		return err.Error()
	}
	return ""
}

func main() {
	log.Set(quiet{})

	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "reading stdin: %v\n", err)
		os.Exit(1)
	}
	var cases []testCase
	if err := json.Unmarshal(input, &cases); err != nil {
		fmt.Fprintf(os.Stderr, "decoding cases: %v\n", err)
		os.Exit(1)
	}

	verdicts := make([]string, 0, len(cases))
	for _, c := range cases {
		verdicts = append(verdicts, run(c))
	}

	if err := json.NewEncoder(os.Stdout).Encode(verdicts); err != nil {
		fmt.Fprintf(os.Stderr, "encoding verdicts: %v\n", err)
		os.Exit(1)
	}
}

// quiet drops the reference's log output so that stdout and stderr stay clean.
type quiet struct{}

func (quiet) Debugf(context.Context, string, ...interface{}) {}
func (quiet) Infof(context.Context, string, ...interface{})  {}
func (quiet) Warnf(context.Context, string, ...interface{})  {}
func (quiet) Errorf(context.Context, string, ...interface{}) {}
