// Command nri-wire-bench measures the round trip of a small NRI ttRPC call
// (Plugin.StartContainer) over the official Go multiplexer, and of a raw
// echo of the same byte counts, on a Unix socket pair with both ends in this
// process.
//
//	nri-wire-bench [-n 20000] [-warmup 2000]
//
// It prints one JSON document:
//
//	{"ttrpc_over_mux": {"median_us": 41.2, "p99_us": 80.1},
//	 "raw": {"median_us": 9.8, "p99_us": 20.3},
//	 "iterations": 20000, "request_payload_bytes": 51,
//	 "request_trunk_bytes": 116, "response_trunk_bytes": 18,
//	 "gomaxprocs": 2, "go_version": "go1.26.8"}
//
// The *_trunk_bytes are what one call puts on the socket in each direction
// (mux header, ttRPC header, ttRPC envelope); the raw echo sends and answers
// exactly that many bytes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime"
	"sort"
	"syscall"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
	"google.golang.org/protobuf/proto"
)

const (
	pluginService  = "nri.pkg.api.v1alpha1.Plugin"
	startContainer = "StartContainer"
	muxHeaderLen   = 8
	ttrpcHeaderLen = 10
)

// Latency is the summary of one measurement.
type Latency struct {
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
}

// Report is the output document.
type Report struct {
	TtrpcOverMux        Latency `json:"ttrpc_over_mux"`
	Raw                 Latency `json:"raw"`
	Iterations          int     `json:"iterations"`
	RequestPayloadBytes int     `json:"request_payload_bytes"`
	RequestTrunkBytes   int     `json:"request_trunk_bytes"`
	ResponseTrunkBytes  int     `json:"response_trunk_bytes"`
	GoMaxProcs          int     `json:"gomaxprocs"`
	GoVersion           string  `json:"go_version"`
}

// benchRequest is the request of every measured call. The Rust bench sends
// the same message.
func benchRequest() *api.StartContainerRequest {
	return &api.StartContainerRequest{
		Pod: &api.PodSandbox{Id: "pod0", Name: "pod0", Uid: "uid0", Namespace: "default"},
		Container: &api.Container{
			Id:           "ctr0",
			PodSandboxId: "pod0",
			Name:         "ctr0",
			State:        api.ContainerState_CONTAINER_CREATED,
		},
	}
}

func main() {
	n := flag.Int("n", 20000, "measured round trips")
	warmup := flag.Int("warmup", 2000, "round trips before measuring")
	flag.Parse()
	if *n < 1 || *warmup < 0 {
		fmt.Fprintln(os.Stderr, "nri-wire-bench: -n must be positive and -warmup not negative")
		os.Exit(2)
	}
	if err := run(*n, *warmup); err != nil {
		fmt.Fprintln(os.Stderr, "nri-wire-bench:", err)
		os.Exit(1)
	}
}

func run(n, warmup int) error {
	req := benchRequest()
	payload, err := proto.Marshal(req)
	if err != nil {
		return err
	}
	reqEnvelope, err := proto.Marshal(&ttrpc.Request{Service: pluginService, Method: startContainer, Payload: payload})
	if err != nil {
		return err
	}
	// A successful empty reply: Go's server leaves out the status, so the
	// envelope is empty.
	respPayload, err := proto.Marshal(&api.StartContainerResponse{})
	if err != nil {
		return err
	}
	respEnvelope, err := proto.Marshal(&ttrpc.Response{Payload: respPayload})
	if err != nil {
		return err
	}
	reqLen := muxHeaderLen + ttrpcHeaderLen + len(reqEnvelope)
	respLen := muxHeaderLen + ttrpcHeaderLen + len(respEnvelope)

	muxed, err := benchTtrpcOverMux(req, n, warmup)
	if err != nil {
		return fmt.Errorf("ttrpc over mux: %w", err)
	}
	raw, err := benchRaw(reqLen, respLen, n, warmup)
	if err != nil {
		return fmt.Errorf("raw echo: %w", err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(Report{
		TtrpcOverMux:        summarize(muxed),
		Raw:                 summarize(raw),
		Iterations:          n,
		RequestPayloadBytes: len(payload),
		RequestTrunkBytes:   reqLen,
		ResponseTrunkBytes:  respLen,
		GoMaxProcs:          runtime.GOMAXPROCS(0),
		GoVersion:           runtime.Version(),
	})
}

// socketpair returns the two ends of a connected Unix stream socket pair.
func socketpair() (net.Conn, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), fmt.Sprintf("socketpair-%d", i))
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			if i == 1 {
				conns[0].Close()
			} else {
				syscall.Close(fds[1])
			}
			return nil, nil, err
		}
		conns[i] = c
	}
	return conns[0], conns[1], nil
}

// benchTtrpcOverMux times Plugin.StartContainer calls from a ttRPC client
// to a ttRPC server, each on its own mux over one end of a socket pair.
func benchTtrpcOverMux(req *api.StartContainerRequest, n, warmup int) ([]time.Duration, error) {
	c0, c1, err := socketpair()
	if err != nil {
		return nil, err
	}
	cmux := multiplex.Multiplex(c0)
	smux := multiplex.Multiplex(c1)
	defer cmux.Close()
	defer smux.Close()

	l, err := smux.Listen(multiplex.PluginServiceConn)
	if err != nil {
		return nil, err
	}
	srv, err := ttrpc.NewServer()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	srv.RegisterService(pluginService, &ttrpc.ServiceDesc{
		Methods: map[string]ttrpc.Method{
			startContainer: func(_ context.Context, unmarshal func(interface{}) error) (interface{}, error) {
				in := &api.StartContainerRequest{}
				if err := unmarshal(in); err != nil {
					return nil, err
				}
				return &api.StartContainerResponse{}, nil
			},
		},
	})
	go func() { _ = srv.Serve(context.Background(), l) }()

	conn, err := cmux.Open(multiplex.PluginServiceConn)
	if err != nil {
		return nil, err
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()
	plugin := api.NewPluginClient(client)

	ctx := context.Background()
	samples := make([]time.Duration, 0, n)
	for i := 0; i < warmup+n; i++ {
		start := time.Now()
		if _, err := plugin.StartContainer(ctx, req); err != nil {
			return nil, err
		}
		if i >= warmup {
			samples = append(samples, time.Since(start))
		}
	}
	return samples, nil
}

// benchRaw times an echo over a bare socket pair: reqLen bytes out,
// respLen bytes back.
func benchRaw(reqLen, respLen, n, warmup int) ([]time.Duration, error) {
	c0, c1, err := socketpair()
	if err != nil {
		return nil, err
	}
	defer c0.Close()
	defer c1.Close()

	echoErr := make(chan error, 1)
	go func() {
		in := make([]byte, reqLen)
		out := make([]byte, respLen)
		for {
			if _, err := io.ReadFull(c1, in); err != nil {
				if err == io.EOF {
					err = nil
				}
				echoErr <- err
				return
			}
			if _, err := c1.Write(out); err != nil {
				echoErr <- err
				return
			}
		}
	}()

	out := make([]byte, reqLen)
	in := make([]byte, respLen)
	samples := make([]time.Duration, 0, n)
	for i := 0; i < warmup+n; i++ {
		start := time.Now()
		if _, err := c0.Write(out); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c0, in); err != nil {
			return nil, err
		}
		if i >= warmup {
			samples = append(samples, time.Since(start))
		}
	}
	c0.Close()
	if err := <-echoErr; err != nil {
		return nil, err
	}
	return samples, nil
}

// summarize returns the median and the 99th percentile (nearest rank).
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(samples)))) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(samples) {
			i = len(samples) - 1
		}
		return samples[i]
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
	return Latency{MedianUs: us(rank(0.5)), P99Us: us(rank(0.99))}
}
