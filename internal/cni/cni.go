// Package cni is vnet's face to container runtimes: a CNI plugin
// (specification 1.0.0 and 1.1.0) that makes each container a VM of an
// infrastructure with a vNIC per attachment, through the service's
// Attacher. It turns what a runtime passes (environment, network
// configuration, capabilities) into a call and the answer into a CNI
// result or error; it reaches neither the store nor the kernel by itself.
// docs/containers.md has the configuration.
package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vnet-project/vnet/internal/oneshot"
	"github.com/vnet-project/vnet/internal/service"
	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/units"
)

// Name is the name the plugin is installed under (a link to the vnet
// binary) and that a network configuration's "type" gives.
const Name = "vnet-cni"

// IPAMType is the IPAM type that has vnet allocate addresses itself, from
// the port group's or network's subnet.
const IPAMType = "vnet"

// DefaultWait bounds the wait for the infrastructure's lock on one
// machine, and over etcd for the host to realize an attachment.
const DefaultWait = 2 * time.Minute

// NetConf is vnet's network configuration: the CNI fields, where the
// infrastructure is and what the containers join in it.
type NetConf struct {
	types.PluginConf
	// Infra is the infrastructure, and PortGroup or Network what the
	// containers' vNICs are on.
	Infra     string `json:"infra"`
	PortGroup string `json:"portgroup"`
	Network   string `json:"network"`
	// Host is the spec's name of this machine; "" is the one host that
	// carries the port group.
	Host string `json:"host,omitempty"`
	// StateDir is the state directory on one machine (default
	// VNET_STATE_DIR, else /var/lib/vnet).
	StateDir string `json:"stateDir,omitempty"`
	// Etcd, when set, is a cluster's etcd: each host's agent realizes
	// the attachments, and ADD returns once this host's has.
	Etcd    []string `json:"etcd,omitempty"`
	EtcdTLS *struct {
		CA   string `json:"ca"`
		Cert string `json:"cert"`
		Key  string `json:"key"`
	} `json:"etcdTLS,omitempty"`
	// Wait bounds the waits (DefaultWait), as a duration ("90s").
	Wait string `json:"wait,omitempty"`
	// Server, when set, is the URL of this machine's vnet server: every
	// command goes through its API, whose process keeps the spec and the
	// kernel's handles, instead of opening the store here. ServerTokenFile
	// holds the bearer token its changes need (default the state
	// directory's api.token, the server's own default), ServerCA the CA of
	// its certificate for https ("" trusts the system's).
	Server          string `json:"server,omitempty"`
	ServerTokenFile string `json:"serverTokenFile,omitempty"`
	ServerCA        string `json:"serverCA,omitempty"`

	RuntimeConfig runtimeConfig `json:"runtimeConfig"`
}

// runtimeConfig holds what the runtime passes for the capabilities the
// configuration names.
type runtimeConfig struct {
	MAC          string            `json:"mac,omitempty"`
	IPs          []string          `json:"ips,omitempty"`
	Bandwidth    *bandwidth        `json:"bandwidth,omitempty"`
	PortMappings []json.RawMessage `json:"portMappings,omitempty"`
}

// bandwidth is CNI's bandwidth capability: rates in bit/s, bursts in bits.
// Ingress is what reaches the container, egress what it sends.
type bandwidth struct {
	IngressRate  uint64 `json:"ingressRate"`
	IngressBurst uint64 `json:"ingressBurst"`
	EgressRate   uint64 `json:"egressRate"`
	EgressBurst  uint64 `json:"egressBurst"`
}

// About is what the plugin says of itself when run without CNI_COMMAND.
const About = "vnet-cni: containers as VMs of a vnet infrastructure, on its port groups and networks (docs/containers.md)"

// Server is the vnet server a configuration names, as OpenServer is
// given it.
type Server struct{ URL, TokenFile, CA string }

// OpenServer reaches a vnet server's attachments; the program sets it
// (the API's client is a face beside this one).
type OpenServer func(Server) (service.AttachBackend, error)

// openServer is Main's.
var openServer OpenServer

// Main runs the plugin: the runtime's command from the environment, the
// configuration on stdin, the result or error on stdout; a configuration
// that names a server goes through server.
func Main(server OpenServer) {
	oneshot.CollectLessOften() // a runtime starts the plugin for each call
	openServer = server
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cmdAdd, Del: cmdDel, Check: cmdCheck, GC: cmdGC, Status: cmdStatus},
		version.PluginSupports("1.0.0", "1.1.0"), About)
}

// Invoked reports whether the process was started as the CNI plugin: by
// its name, or by a runtime (CNI_COMMAND set) with no arguments.
func Invoked(args []string) bool {
	if len(args) == 0 {
		return false
	}
	return filepath.Base(args[0]) == Name || os.Getenv("CNI_COMMAND") != "" && len(args) == 1
}

// loadConf reads and checks the network configuration.
func loadConf(stdin []byte, needTarget bool) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "network configuration: "+err.Error(), "")
	}
	switch {
	case conf.Infra == "":
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `network configuration: "infra" names no infrastructure`, "")
	case needTarget && conf.PortGroup == "" && conf.Network == "":
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `network configuration: give "portgroup" or "network", what the containers join`, "")
	case conf.PortGroup != "" && conf.Network != "":
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `network configuration: "portgroup" or "network", not both`, "")
	}
	if _, err := conf.wait(); err != nil {
		return nil, err
	}
	if err := conf.checkServer(); err != nil {
		return nil, err
	}
	return conf, nil
}

// checkServer refuses a server beside another place for the state: the
// server is the one writer of its store.
func (c *NetConf) checkServer() error {
	switch {
	case c.Server == "" && (c.ServerTokenFile != "" || c.ServerCA != ""):
		return types.NewError(types.ErrInvalidNetworkConfig, `network configuration: "serverTokenFile" and "serverCA" go with "server"`, "")
	case c.Server != "" && (c.StateDir != "" || len(c.Etcd) > 0):
		return types.NewError(types.ErrInvalidNetworkConfig, `network configuration: "server" or "stateDir"/"etcd", not both: the server keeps the state`, "")
	}
	return nil
}

func (c *NetConf) wait() (time.Duration, error) {
	if c.Wait == "" {
		return DefaultWait, nil
	}
	d, err := time.ParseDuration(c.Wait)
	if err != nil || d <= 0 {
		return 0, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("network configuration: wait %q is not a duration such as 90s", c.Wait), "")
	}
	return d, nil
}

// backend is what the plugin asks of the service: attachments, and
// whether the infrastructure is there.
type backend = service.AttachBackend

// open is the back end the configuration names: a vnet server, this
// machine's state directory, or a cluster's etcd.
var open = func(c *NetConf) (backend, error) {
	if c.Server != "" {
		return c.openServer()
	}
	site := service.AttachSite{StateDir: c.StateDir, Etcd: c.Etcd}
	if t := c.EtcdTLS; t != nil {
		site.TLS = service.TLSFiles{CA: t.CA, Cert: t.Cert, Key: t.Key}
	}
	return service.OpenAttachSite(site), nil
}

// netnsName is the name in /run/netns of the namespace a runtime passes
// as a path; vnet attaches namespaces that are bind-mounted there, as
// podman, containerd and CRI-O make them.
func netnsName(path string) (string, error) {
	dir, base := filepath.Split(filepath.Clean(path))
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	if filepath.Clean(dir) != "/run/netns" || base == "" {
		return "", types.NewError(types.ErrInvalidNetNS, fmt.Sprintf("namespace %q: vnet attaches namespaces bind-mounted in /run/netns (as podman, containerd and CRI-O make them)", path), "")
	}
	return base, nil
}

// podArgs reads the pod's namespace and name from CNI_ARGS
// ("K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0;...").
func podArgs(args string) (namespace, name string) {
	for _, kv := range strings.Split(args, ";") {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "K8S_POD_NAMESPACE":
			namespace = v
		case "K8S_POD_NAME":
			name = v
		}
	}
	return namespace, name
}

// shaping maps CNI's bandwidth capability onto the vNIC's shaper.
func shaping(b *bandwidth) (*spec.Shaping, error) {
	if b == nil {
		return nil, nil
	}
	out := &spec.Shaping{}
	for _, d := range []struct {
		rate, burst uint64
		to          **spec.Shaper
		what        string
	}{{b.IngressRate, b.IngressBurst, &out.Ingress, "ingress"}, {b.EgressRate, b.EgressBurst, &out.Egress, "egress"}} {
		switch {
		case d.rate == 0 && d.burst == 0:
			continue
		case d.rate == 0 || d.burst == 0:
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("bandwidth: %sRate and %sBurst go together", d.what, d.what), "")
		}
		*d.to = &spec.Shaper{Average: units.Rate(d.rate), Burst: units.Size(d.burst / 8)}
	}
	if out.Ingress == nil && out.Egress == nil {
		return nil, nil
	}
	return out, nil
}

// cniError turns a service error into the CNI error a runtime acts on.
func cniError(what string, err error) error {
	var te *types.Error
	if errors.As(err, &te) {
		return te
	}
	code := uint(types.ErrInternal)
	switch {
	case errors.Is(err, service.ErrNoServer):
		// No fallback to this machine's store: the server writes it.
		code = types.ErrTryAgainLater
	case errors.Is(err, service.ErrLocked), errors.Is(err, service.ErrTimedOut),
		errors.Is(err, service.ErrUnavailable), errors.Is(err, service.ErrConflict):
		code = types.ErrTryAgainLater
	case errors.Is(err, service.ErrInvalid), errors.Is(err, service.ErrNotFound):
		code = types.ErrInvalidNetworkConfig
	}
	return types.NewError(code, what+": "+err.Error(), "")
}

// ipNets turns addresses with prefix lengths into a result's.
func ipNets(cidrs []string) ([]*current.IPConfig, error) {
	var out []*current.IPConfig
	for _, c := range cidrs {
		ip, n, err := net.ParseCIDR(c)
		if err != nil {
			return nil, err
		}
		out = append(out, &current.IPConfig{Address: net.IPNet{IP: ip, Mask: n.Mask}, Interface: current.Int(1)})
	}
	return out, nil
}

// delegated says whether IPAM goes to a plugin (not to vnet, and not
// none).
func (c *NetConf) delegated() bool { return c.IPAM.Type != "" && c.IPAM.Type != IPAMType }

// ipamDel releases what a delegated IPAM plugin gave the container.
func ipamDel(ctx context.Context, c *NetConf, stdin []byte) error {
	if !c.delegated() {
		return nil
	}
	if err := invoke.DelegateDel(ctx, c.IPAM.Type, stdin, nil); err != nil {
		return types.NewError(types.ErrIOFailure, "IPAM "+c.IPAM.Type+": "+err.Error(), "")
	}
	return nil
}

// context bounds a command by the configuration's wait and a margin.
func (c *NetConf) context() (context.Context, context.CancelFunc) {
	d, _ := c.wait()
	return context.WithTimeout(context.Background(), d+30*time.Second)
}

// openServer is the server's back end. Without a token file named it takes
// the server's default one when it is there: reads need none, and a
// change without one gets the server's clear refusal.
func (c *NetConf) openServer() (backend, error) {
	if openServer == nil {
		return nil, types.NewError(types.ErrInternal, "this build of the plugin reaches no vnet server", "")
	}
	tokens := c.ServerTokenFile
	if tokens == "" {
		dir := os.Getenv("VNET_STATE_DIR")
		if dir == "" {
			dir = service.DefaultStateDir
		}
		if def := filepath.Join(dir, "api.token"); fileExists(def) {
			tokens = def
		}
	}
	b, err := openServer(Server{URL: c.Server, TokenFile: tokens, CA: c.ServerCA})
	if err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "server "+c.Server+": "+err.Error(), "")
	}
	return b, nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
