package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
)

// recConn records every byte written to the wrapped connection.
type recConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *recConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.buf = append(c.buf, b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *recConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...)
}

// Frame describes one mux frame found in a byte stream.
type Frame struct {
	Conn uint32 `json:"conn"`
	Len  uint32 `json:"len"`
}

// Message describes one ttRPC message reassembled from a mux connection.
type Message struct {
	Conn     uint32 `json:"conn"`
	StreamID uint32 `json:"stream_id"`
	Type     uint8  `json:"type"`
	Flags    uint8  `json:"flags"`
	Len      uint32 `json:"len"`
	payload  []byte
}

// splitFrames parses mux frames; a trailing partial frame is reported as an
// error together with the complete frames before it.
func splitFrames(data []byte) ([]Frame, map[uint32][]byte, error) {
	var frames []Frame
	streams := map[uint32][]byte{}
	for len(data) > 0 {
		if len(data) < 8 {
			return frames, streams, fmt.Errorf("truncated frame header (%d bytes)", len(data))
		}
		id := binary.BigEndian.Uint32(data[0:4])
		n := binary.BigEndian.Uint32(data[4:8])
		if uint64(len(data)-8) < uint64(n) {
			return frames, streams, fmt.Errorf("truncated frame payload (want %d, have %d)", n, len(data)-8)
		}
		frames = append(frames, Frame{Conn: id, Len: n})
		streams[id] = append(streams[id], data[8:8+n]...)
		data = data[8+n:]
	}
	return frames, streams, nil
}

// splitMessages parses the ttRPC messages of one mux connection's bytes.
func splitMessages(conn uint32, data []byte) ([]Message, error) {
	var msgs []Message
	for len(data) > 0 {
		if len(data) < 10 {
			return msgs, fmt.Errorf("truncated ttrpc header (%d bytes)", len(data))
		}
		n := binary.BigEndian.Uint32(data[0:4])
		if uint64(len(data)-10) < uint64(n) {
			return msgs, fmt.Errorf("truncated ttrpc payload (want %d, have %d)", n, len(data)-10)
		}
		msgs = append(msgs, Message{
			Conn:     conn,
			Len:      n,
			StreamID: binary.BigEndian.Uint32(data[4:8]),
			Type:     data[8],
			Flags:    data[9],
			payload:  data[10 : 10+n],
		})
		data = data[10+n:]
	}
	return msgs, nil
}

// countMessages counts the complete ttRPC messages of the given type on a
// mux connection in a trunk byte stream.
func countMessages(data []byte, conn uint32, typ uint8) int {
	_, streams, _ := splitFrames(data)
	msgs, _ := splitMessages(conn, streams[conn])
	n := 0
	for _, m := range msgs {
		if m.Type == typ {
			n++
		}
	}
	return n
}
