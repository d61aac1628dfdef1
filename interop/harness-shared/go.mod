module nri-rs.dev/interop/harness-shared

go 1.21

require (
	github.com/containerd/nri v0.9.0
	github.com/containerd/ttrpc v1.2.6-0.20240827082320-b5cd6e4b3287
	google.golang.org/protobuf v1.34.1
)
