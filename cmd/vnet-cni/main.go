// Command vnet-cni is vnet's CNI plugin on its own (docs/containers.md).
//
// `vnet` answers CNI too when called by this name, but it carries the
// whole of vnet: the embedded etcd member of `vnet server`, the lab and its
// results database. A runtime starts the plugin afresh for every ADD, DEL
// and CHECK, and the Go runtime initializes every package a binary links
// before main runs, which for `vnet` takes about 10 ms more per call
// (docs/benchmarks.md). This binary links only the plugin, the service
// layer it calls and the API's client.
package main

import (
	"github.com/vnet-project/vnet/internal/api"
	"github.com/vnet-project/vnet/internal/cni"
	"github.com/vnet-project/vnet/internal/service"
)

func main() {
	cni.Main(openAttachServer)
}

// openAttachServer is how the plugin reaches the vnet server its
// configuration names: through the API's client, which the plugin's
// package sits beside rather than above.
func openAttachServer(s cni.Server) (service.AttachBackend, error) {
	return api.OpenAttachServer(api.AttachServer{URL: s.URL, TokenFile: s.TokenFile, CA: s.CA})
}
