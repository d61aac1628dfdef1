// Package refplugin is the configuration, event log and ttRPC plumbing shared by the
// reference plugins of both harnesses (nri-ref-plugin on NRI v0.12,
// nri-ref-plugin-old on v0.9.0): each keeps its own Entry type, whose
// fields follow what its NRI version delivers.
package refplugin

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

// Log appends JSON lines to a file; safe for concurrent use.
type Log struct {
	mu sync.Mutex
	f  *os.File
}

// Open opens the log at path ("": a log that writes nothing until
// OpenFile gives it a file).
func Open(path string) (*Log, error) {
	l := &Log{}
	if err := l.OpenFile(path); err != nil {
		return nil, err
	}
	return l, nil
}

// OpenFile starts logging to path unless a log file is already open.
func (l *Log) OpenFile(path string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil || path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	l.f = f
	return nil
}

// encodingError is the line written for an entry that does not encode.
type encodingError struct {
	Event string `json:"event"`
	Error string `json:"error,omitempty"`
}

// Write appends entry (of the event named event) to the log; without a log
// file it does nothing, not even encode the entry.
func (l *Log) Write(entry interface{}, event string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	data, err := json.Marshal(entry)
	if err != nil {
		data, _ = json.Marshal(&encodingError{Event: event, Error: "log encoding: " + err.Error()})
	}
	_, _ = l.f.Write(append(data, '\n'))
	_ = l.f.Sync()
}

type rpcKey struct{}

// WithRPC tags ctx with the name of the ttRPC method (the last part of
// fullMethod) that delivered the request.
func WithRPC(ctx context.Context, fullMethod string) context.Context {
	return context.WithValue(ctx, rpcKey{}, fullMethod[strings.LastIndex(fullMethod, "/")+1:])
}

// RPCOf is the method name WithRPC put into ctx ("" if none), e.g.
// "StateChange" when an old runtime uses the generic notification.
func RPCOf(ctx context.Context) string {
	if v, ok := ctx.Value(rpcKey{}).(string); ok {
		return v
	}
	return ""
}

// AddEvictions is a ttRPC client interceptor step: an UpdateContainers
// request gets the evictions take returns appended (the Go stub has no API
// for them).
func AddEvictions(req *ttrpc.Request, info *ttrpc.UnaryClientInfo, take func() []*api.ContainerEviction) {
	if !strings.HasSuffix(info.FullMethod, "/UpdateContainers") {
		return
	}
	ev := take()
	if len(ev) == 0 {
		return
	}
	msg := &api.UpdateContainersRequest{}
	if err := proto.Unmarshal(req.Payload, msg); err == nil {
		msg.Evict = append(msg.Evict, ev...)
		if data, err := proto.Marshal(msg); err == nil {
			req.Payload = data
		}
	}
}
