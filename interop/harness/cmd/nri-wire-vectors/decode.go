package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

// ttRPC message types.
const (
	msgRequest  = 1
	msgResponse = 2
)

// decodeWait bounds how long one case may take.
const decodeWait = 5 * time.Second

// DecodeInput is the file given to "decode".
type DecodeInput struct {
	Cases []struct {
		Name              string `json:"name"`
		ClientToServerHex string `json:"client_to_server_hex"`
	} `json:"cases"`
}

// DecodedRequest is one request the Go server received.
type DecodedRequest struct {
	Service     string      `json:"service"`
	Method      string      `json:"method"`
	RequestJSON interface{} `json:"request_json"`
}

// DecodedResponse is one ttRPC response the Go server wrote.
type DecodedResponse struct {
	StreamID uint32      `json:"stream_id"`
	Status   *StatusJSON `json:"status"`
}

// DecodedCase is the outcome of feeding one case to the Go server.
type DecodedCase struct {
	Name              string            `json:"name"`
	Requests          []DecodedRequest  `json:"requests"`
	Responses         []DecodedResponse `json:"responses"`
	ServerToClientHex string            `json:"server_to_client_hex"`
	ClientFrames      []Frame           `json:"client_to_server_frames"`
	Error             string            `json:"error"`
}

func decodeFile(path string) (interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	in := &DecodeInput{}
	if err := json.Unmarshal(data, in); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	out := []DecodedCase{}
	for _, c := range in.Cases {
		raw, err := hex.DecodeString(c.ClientToServerHex)
		if err != nil {
			out = append(out, DecodedCase{Name: c.Name, Requests: []DecodedRequest{},
				Responses: []DecodedResponse{}, Error: "bad hex: " + err.Error()})
			continue
		}
		out = append(out, decodeOne(c.Name, raw))
	}
	return map[string]interface{}{"cases": out}, nil
}

// decodeOne feeds raw client bytes to a Go mux + ttRPC server serving the
// Plugin service, and reports what the server received and answered.
func decodeOne(name string, raw []byte) DecodedCase {
	dc := DecodedCase{Name: name, Requests: []DecodedRequest{}, Responses: []DecodedResponse{}}
	var problems []string
	frames, _, perr := splitFrames(raw)
	dc.ClientFrames = frames
	if perr != nil {
		problems = append(problems, "client bytes: "+perr.Error())
	}
	want := countMessages(raw, uint32(multiplex.PluginServiceConn), msgRequest)

	var (
		mu   sync.Mutex
		reqs []DecodedRequest
	)
	record := func(ctx context.Context, unmarshal ttrpc.Unmarshaler, info *ttrpc.UnaryServerInfo, method ttrpc.Method) (interface{}, error) {
		var captured interface{}
		wrapped := func(v interface{}) error {
			captured = v
			return unmarshal(v)
		}
		rpl, err := method(ctx, wrapped)
		svc, m := splitFullMethod(info.FullMethod)
		mu.Lock()
		reqs = append(reqs, DecodedRequest{Service: svc, Method: m, RequestJSON: captured})
		mu.Unlock()
		return rpl, err
	}

	a, b := net.Pipe()
	smux := multiplex.Multiplex(b)
	defer smux.Close()
	l, err := smux.Listen(multiplex.PluginServiceConn)
	if err != nil {
		dc.Error = err.Error()
		return dc
	}
	srv, err := ttrpc.NewServer(ttrpc.WithUnaryServerInterceptor(record))
	if err != nil {
		dc.Error = err.Error()
		return dc
	}
	defer srv.Close()
	api.RegisterPluginService(srv, &cannedPlugin{})
	go func() { _ = srv.Serve(context.Background(), l) }()

	// Collect everything the server writes back.
	var (
		rmu  sync.Mutex
		back bytes.Buffer
	)
	go func() {
		buf := make([]byte, 64*1024)
		for {
			n, err := a.Read(buf)
			rmu.Lock()
			back.Write(buf[:n])
			rmu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	snapshot := func() []byte {
		rmu.Lock()
		defer rmu.Unlock()
		return append([]byte(nil), back.Bytes()...)
	}

	writeErr := make(chan error, 1)
	go func() {
		_ = a.SetWriteDeadline(time.Now().Add(decodeWait))
		_, err := a.Write(raw)
		writeErr <- err
	}()

	deadline := time.Now().Add(decodeWait)
	for time.Now().Before(deadline) {
		if countMessages(snapshot(), uint32(multiplex.PluginServiceConn), msgResponse) >= want {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-writeErr:
		if err != nil && err != io.EOF {
			problems = append(problems, "write: "+err.Error())
		}
	case <-time.After(100 * time.Millisecond):
		problems = append(problems, "server did not consume all client bytes")
	}
	a.Close()

	s2c := snapshot()
	dc.ServerToClientHex = hex.EncodeToString(s2c)
	_, streams, _ := splitFrames(s2c)
	msgs, _ := splitMessages(uint32(multiplex.PluginServiceConn), streams[uint32(multiplex.PluginServiceConn)])
	for _, m := range msgs {
		if m.Type != msgResponse {
			continue
		}
		resp := &ttrpc.Response{}
		r := DecodedResponse{StreamID: m.StreamID}
		if err := proto.Unmarshal(m.payload, resp); err != nil {
			problems = append(problems, "response decode: "+err.Error())
		} else if resp.Status != nil && resp.Status.Code != 0 {
			r.Status = &StatusJSON{Code: resp.Status.Code, Message: resp.Status.Message}
		}
		dc.Responses = append(dc.Responses, r)
	}
	if len(dc.Responses) < want {
		problems = append(problems, fmt.Sprintf("expected %d responses, got %d", want, len(dc.Responses)))
	}

	mu.Lock()
	dc.Requests = append(dc.Requests, reqs...)
	mu.Unlock()
	dc.Error = strings.Join(problems, "; ")
	return dc
}

func splitFullMethod(full string) (string, string) {
	full = strings.TrimPrefix(full, "/")
	if i := strings.LastIndex(full, "/"); i >= 0 {
		return full[:i], full[i+1:]
	}
	return "", full
}
