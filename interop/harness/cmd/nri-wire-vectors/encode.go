package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/net/multiplex"
	"github.com/containerd/ttrpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const pluginService = "nri.pkg.api.v1alpha1.Plugin"

// EncodedCase is one Go-produced vector.
type EncodedCase struct {
	Name              string      `json:"name"`
	Service           string      `json:"service"`
	Method            string      `json:"method"`
	RequestJSON       interface{} `json:"request_json"`
	ResponseJSON      interface{} `json:"response_json"`
	Status            *StatusJSON `json:"status"`
	ClientToServerHex string      `json:"client_to_server_hex"`
	ServerToClientHex string      `json:"server_to_client_hex"`
	ClientFrames      []Frame     `json:"client_to_server_frames"`
	ServerFrames      []Frame     `json:"server_to_client_frames"`
}

// StatusJSON is a google.rpc status carried by an error response.
type StatusJSON struct {
	Code    int32  `json:"code"`
	Message string `json:"message"`
}

type encCase struct {
	name   string
	method string
	req    interface{}
	server *cannedPlugin
	call   func(ctx context.Context, pc api.PluginService, c *ttrpc.Client) (interface{}, error)
}

func encodeAll() (interface{}, error) {
	var out []EncodedCase
	for _, c := range encCases() {
		ec, err := encodeOne(c)
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", c.name, err)
		}
		out = append(out, *ec)
	}
	return map[string]interface{}{"cases": out}, nil
}

func encodeOne(c encCase) (*EncodedCase, error) {
	a, b := net.Pipe()
	ca := &recConn{Conn: a}
	cb := &recConn{Conn: b}

	cmux := multiplex.Multiplex(ca)
	smux := multiplex.Multiplex(cb)
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
	api.RegisterPluginService(srv, c.server)
	go func() { _ = srv.Serve(context.Background(), l) }()

	conn, err := cmux.Open(multiplex.PluginServiceConn)
	if err != nil {
		return nil, err
	}
	client := ttrpc.NewClient(conn)
	defer client.Close()

	// No deadline: the request then carries no timeout_nano and the bytes
	// are reproducible.
	rpl, callErr := c.call(context.Background(), api.NewPluginClient(client), client)

	ec := &EncodedCase{Name: c.name, Service: pluginService, Method: c.method, RequestJSON: c.req}
	if callErr != nil {
		st, ok := status.FromError(callErr)
		if !ok {
			return nil, callErr
		}
		ec.Status = &StatusJSON{Code: int32(st.Code()), Message: st.Message()}
	} else {
		ec.ResponseJSON = rpl
	}
	c2s, s2c := ca.bytes(), cb.bytes()
	ec.ClientToServerHex = hex.EncodeToString(c2s)
	ec.ServerToClientHex = hex.EncodeToString(s2c)
	ec.ClientFrames, _, _ = splitFrames(c2s)
	ec.ServerFrames, _, _ = splitFrames(s2c)
	return ec, nil
}

func encCases() []encCase {
	configure := &api.ConfigureRequest{
		Config:              "key: value",
		RuntimeName:         "containerd",
		RuntimeVersion:      "v2.2.0",
		RegistrationTimeout: 5000,
		RequestTimeout:      2000,
		NRIVersion:          "v0.12.5",
	}
	create := &api.CreateContainerRequest{Pod: samplePod(0), Container: sampleContainer(0, 0)}
	adjust := &api.ContainerAdjustment{}
	adjust.AddAnnotation("nri.example/owner", "plugin")
	adjust.AddEnv("INJECTED", "1")
	adjust.RemoveEnv("REMOVED")
	adjust.AddMount(&api.Mount{Destination: "/data", Source: "/host/data", Type: "bind", Options: []string{"rbind", "ro"}})
	adjust.SetLinuxMemoryLimit(256 << 20)
	adjust.SetLinuxCPUShares(512)
	adjust.SetLinuxCPUSetCPUs("0-1")
	update := &api.ContainerUpdate{}
	update.SetContainerId("ctr1")
	update.SetLinuxCPUShares(256)
	createRpl := &api.CreateContainerResponse{Adjust: adjust, Update: []*api.ContainerUpdate{update}}

	sync := &api.SynchronizeRequest{}
	for i := 0; i < 4; i++ {
		sync.Pods = append(sync.Pods, samplePod(i))
	}
	for i := 0; i < 40; i++ {
		sync.Containers = append(sync.Containers, sampleContainer(i, i%4))
	}
	syncUpdate := &api.ContainerUpdate{}
	syncUpdate.SetContainerId("ctr3")
	syncUpdate.SetLinuxMemoryLimit(1 << 30)
	syncRpl := &api.SynchronizeResponse{Update: []*api.ContainerUpdate{syncUpdate}}

	stop := &api.StopContainerRequest{Pod: samplePod(0), Container: sampleContainer(0, 0)}

	return []encCase{
		{
			name: "configure", method: "Configure", req: configure,
			server: &cannedPlugin{resp: map[string]interface{}{"Configure": &api.ConfigureResponse{
				Events: int32(api.MustParseEventMask("CreateContainer", "StopContainer")),
			}}},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.Configure(ctx, configure)
			},
		},
		{
			name: "create_container_adjust", method: "CreateContainer", req: create,
			server: &cannedPlugin{resp: map[string]interface{}{"CreateContainer": createRpl}},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.CreateContainer(ctx, create)
			},
		},
		{
			name: "synchronize_large", method: "Synchronize", req: sync,
			server: &cannedPlugin{resp: map[string]interface{}{"Synchronize": syncRpl}},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.Synchronize(ctx, sync)
			},
		},
		{
			name: "shutdown_empty", method: "Shutdown", req: &api.Empty{},
			server: &cannedPlugin{},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.Shutdown(ctx, &api.Empty{})
			},
		},
		{
			name: "error_status", method: "StopContainer", req: stop,
			server: &cannedPlugin{errs: map[string]error{"StopContainer": errors.New("injected failure")}},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.StopContainer(ctx, stop)
			},
		},
		{
			name: "error_status_code", method: "UpdatePodSandbox", req: &api.UpdatePodSandboxRequest{Pod: samplePod(1)},
			server: &cannedPlugin{errs: map[string]error{"UpdatePodSandbox": status.Error(codes.Unimplemented, "not implemented here")}},
			call: func(ctx context.Context, pc api.PluginService, _ *ttrpc.Client) (interface{}, error) {
				return pc.UpdatePodSandbox(ctx, &api.UpdatePodSandboxRequest{Pod: samplePod(1)})
			},
		},
		{
			name: "unknown_method", method: "NoSuchMethod", req: &api.Empty{},
			server: &cannedPlugin{},
			call: func(ctx context.Context, _ api.PluginService, c *ttrpc.Client) (interface{}, error) {
				rpl := &api.Empty{}
				err := c.Call(ctx, pluginService, "NoSuchMethod", &api.Empty{}, rpl)
				return rpl, err
			},
		},
	}
}

// samplePod and sampleContainer build deterministic objects. Maps hold at
// most one entry: Go's protobuf encoder writes map entries in random order.
func samplePod(i int) *api.PodSandbox {
	return &api.PodSandbox{
		Id:             fmt.Sprintf("pod%d", i),
		Name:           fmt.Sprintf("pod%d", i),
		Uid:            fmt.Sprintf("uid-%d", i),
		Namespace:      "default",
		Labels:         map[string]string{"app": fmt.Sprintf("app%d", i)},
		RuntimeHandler: "runc",
		Linux: &api.LinuxPodSandbox{
			CgroupParent: fmt.Sprintf("/kubepods/pod%d", i),
		},
		Pid: uint32(1000 + i),
	}
}

func sampleContainer(i, pod int) *api.Container {
	return &api.Container{
		Id:           fmt.Sprintf("ctr%d", i),
		PodSandboxId: fmt.Sprintf("pod%d", pod),
		Name:         fmt.Sprintf("ctr%d", i),
		State:        api.ContainerState_CONTAINER_RUNNING,
		Labels:       map[string]string{"io.kubernetes.container.name": fmt.Sprintf("ctr%d", i)},
		Args:         []string{"/bin/sh", "-c", "sleep 3600"},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", fmt.Sprintf("INDEX=%d", i)},
		Mounts: []*api.Mount{
			{Destination: "/etc/hosts", Source: fmt.Sprintf("/var/lib/pods/pod%d/hosts", pod), Type: "bind", Options: []string{"rbind", "rw"}},
		},
		Linux: &api.LinuxContainer{
			Resources: &api.LinuxResources{
				Cpu:    &api.LinuxCPU{Shares: api.UInt64(102), Quota: api.Int64(50000), Period: api.UInt64(100000)},
				Memory: &api.LinuxMemory{Limit: api.Int64(128 << 20)},
			},
			CgroupsPath: fmt.Sprintf("/kubepods/pod%d/ctr%d", pod, i),
		},
		Pid: uint32(2000 + i),
	}
}
