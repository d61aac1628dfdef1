// Command nri-wire-vectors produces and checks byte-level vectors of the NRI
// wire protocol (mux frames carrying ttRPC messages) using the official Go
// multiplexer and ttRPC.
//
//	nri-wire-vectors encode            # print Go-produced vectors as JSON
//	nri-wire-vectors decode FILE.json  # decode client bytes with a Go server
//	nri-wire-vectors oversized         # Go's mux error for an oversized frame
//
// See interop/README.md for the JSON formats.
package main

import (
	"encoding/json"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var (
		out interface{}
		err error
	)
	switch os.Args[1] {
	case "encode":
		out, err = encodeAll()
	case "oversized":
		out, err = oversized()
	case "decode":
		if len(os.Args) != 3 {
			usage()
		}
		out, err = decodeFile(os.Args[2])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nri-wire-vectors:", err)
		os.Exit(1)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "nri-wire-vectors:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nri-wire-vectors encode | nri-wire-vectors decode FILE.json | nri-wire-vectors oversized")
	os.Exit(2)
}
