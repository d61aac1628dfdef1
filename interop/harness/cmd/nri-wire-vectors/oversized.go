package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/containerd/nri/pkg/net/multiplex"
)

// OversizedResult is what Go's multiplexer makes of a frame header that
// announces more than the largest payload it accepts.
type OversizedResult struct {
	Announced uint32 `json:"announced"`
	// Error is what a read of the connection returns: the mux's own words.
	Error string `json:"error"`
}

// oversized feeds Go's multiplexer a frame header for the plugin service
// conn announcing one byte more than it accepts, and reports the error the
// conn's reader gets.
func oversized() (*OversizedResult, error) {
	// The largest payload a frame carries on the wire (10 + 4 MiB).
	const maxPayload = 10 + 4<<20
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	mux := multiplex.Multiplex(a)
	defer mux.Close()
	conn, err := mux.Open(multiplex.PluginServiceConn)
	if err != nil {
		return nil, err
	}
	hdr := make([]byte, 8)
	binary.BigEndian.PutUint32(hdr[0:4], uint32(multiplex.PluginServiceConn))
	binary.BigEndian.PutUint32(hdr[4:8], maxPayload+1)
	go func() { _, _ = b.Write(hdr) }()
	done := make(chan error, 1)
	go func() {
		_, err := conn.Read(make([]byte, 8))
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			return nil, fmt.Errorf("the mux accepted an oversized frame")
		}
		return &OversizedResult{Announced: maxPayload + 1, Error: err.Error()}, nil
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("the mux neither refused nor delivered an oversized frame")
	}
}
