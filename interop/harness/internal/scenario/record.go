package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

// Full ttRPC method names the recorder looks at.
const (
	methodSynchronize    = "/nri.pkg.api.v1alpha1.Plugin/Synchronize"
	methodRegisterPlugin = "/nri.pkg.api.v1alpha1.Runtime/RegisterPlugin"
)

// Output is the single JSON document nri-ref-runtime prints.
type Output struct {
	Steps       []StepResult `json:"steps"`
	Synchronize []SyncRecord `json:"synchronize"`
	UpdateCalls []UpdateCall `json:"update_calls"`
	Plugins     []string     `json:"plugins"`
	Error       string       `json:"error,omitempty"`
}

// StepResult is the outcome of one replayed step.
type StepResult struct {
	Op        string `json:"op"`
	Pod       string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	// TraceID is the trace of the step's span (scenarios with "trace").
	TraceID string      `json:"trace_id,omitempty"`
	Error   string      `json:"error"`
	Result  interface{} `json:"result"`
}

// SyncRecord is one SyncFn invocation: what the runtime offered and what
// the plugins asked for in return.
type SyncRecord struct {
	Pods       int                    `json:"pods"`
	Containers int                    `json:"containers"`
	Updates    []*api.ContainerUpdate `json:"updates"`
	Failed     []*api.ContainerUpdate `json:"failed"`
	Error      string                 `json:"error"`
}

// UpdateCall is one unsolicited UpdateFn call (a plugin's UpdateContainers).
type UpdateCall struct {
	Updates []*api.ContainerUpdate `json:"updates"`
	Failed  []*api.ContainerUpdate `json:"failed"`
}

// Recorder collects everything the adaptation tells the runtime. It is
// safe for concurrent use.
type Recorder struct {
	mu       sync.Mutex
	syncs    []SyncRecord
	updates  []UpdateCall
	plugins  map[string]bool
	syncDone int
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{plugins: map[string]bool{}}
}

// AddSync records a SyncFn invocation.
func (r *Recorder) AddSync(rec SyncRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncs = append(r.syncs, rec)
}

// AddUpdateCall records an UpdateFn invocation.
func (r *Recorder) AddUpdateCall(rec UpdateCall) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updates = append(r.updates, rec)
}

func (r *Recorder) counts() (syncDone, updates int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.syncDone, len(r.updates)
}

// Fill copies the recorded data into the output document.
func (r *Recorder) Fill(out *Output) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out.Synchronize = append([]SyncRecord{}, r.syncs...)
	out.UpdateCalls = append([]UpdateCall{}, r.updates...)
	out.Plugins = SortedKeys(r.plugins)
}

// ClientInterceptor counts plugins that completed Synchronize (the final,
// more=false message answered without error).
func (r *Recorder) ClientInterceptor(ctx context.Context, req *ttrpc.Request, resp *ttrpc.Response,
	info *ttrpc.UnaryClientInfo, invoker ttrpc.Invoker) error {
	err := invoker(ctx, req, resp)
	if info.FullMethod != methodSynchronize || err != nil {
		return err
	}
	if resp.Status != nil && resp.Status.Code != 0 {
		return err
	}
	sreq := &api.SynchronizeRequest{}
	if proto.Unmarshal(req.Payload, sreq) == nil && !sreq.More {
		r.mu.Lock()
		r.syncDone++
		r.mu.Unlock()
	}
	return err
}

// ServerInterceptor records the names of the plugins that register.
func (r *Recorder) ServerInterceptor(ctx context.Context, unmarshal ttrpc.Unmarshaler,
	info *ttrpc.UnaryServerInfo, method ttrpc.Method) (interface{}, error) {
	if info.FullMethod == methodRegisterPlugin {
		req := &api.RegisterPluginRequest{}
		if unmarshal(req) == nil {
			r.mu.Lock()
			r.plugins[req.PluginIdx+"-"+req.PluginName] = true
			r.mu.Unlock()
		}
	}
	return method(ctx, unmarshal)
}

// WaitPlugins waits until count plugins have completed Synchronize, then
// passes the barrier (which waits for the adaptation to finish adding
// them to its plugin list).
func (r *Recorder) WaitPlugins(count int, timeout time.Duration, barrier func()) (interface{}, error) {
	if err := poll(timeout, func() bool { n, _ := r.counts(); return n >= count }); err != nil {
		n, _ := r.counts()
		return nil, fmt.Errorf("timed out waiting for %d synchronized plugins (have %d)", count, n)
	}
	barrier()
	n, _ := r.counts()
	return map[string]int{"synchronized": n}, nil
}

// WaitUpdates waits until count unsolicited update calls have been recorded.
func (r *Recorder) WaitUpdates(count int, timeout time.Duration) (interface{}, error) {
	if err := poll(timeout, func() bool { _, n := r.counts(); return n >= count }); err != nil {
		_, n := r.counts()
		return nil, fmt.Errorf("timed out waiting for %d update calls (have %d)", count, n)
	}
	_, n := r.counts()
	return map[string]int{"update_calls": n}, nil
}

func poll(timeout time.Duration, done func() bool) error {
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timeout")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

// WriteOutput prints the output document to path ("" or "-" = stdout).
func WriteOutput(out *Output, path string) error {
	var w io.Writer = os.Stdout
	if path != "" && path != "-" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// ErrString renders an error for the output ("" for nil).
func ErrString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
