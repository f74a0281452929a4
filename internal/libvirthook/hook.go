// Package libvirthook is vnet's face to libvirt: a hook of its QEMU driver
// (/etc/libvirt/hooks/qemu.d/) that puts a domain's TAPs on port groups or
// networks of an infrastructure while the domain runs. A domain asks for it
// in its own XML, in a <metadata> element of vnet's namespace; the domain
// becomes a VM of the infrastructure (as a container does through the CNI
// plugin) when it has started, and leaves it when it stops. It turns what
// libvirt passes (arguments, the domain's XML) into calls of the service's
// Attacher; it reaches neither the store nor the kernel by itself.
// docs/libvirt.md has the set-up.
package libvirthook

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vnet-project/vnet/internal/service"
)

// Namespace is the XML namespace of vnet's element in a domain's
// <metadata>.
const Namespace = "https://github.com/vnet-project/vnet/libvirt"

// DefaultWait bounds the wait for the infrastructure's lock: libvirt
// waits for its hooks, and a domain's start with it.
const DefaultWait = time.Minute

// maxXML bounds what the hook reads of the domain's XML on its standard
// input: a domain's definition is kilobytes.
const maxXML = 16 << 20

// Invoked reports whether the process was started as libvirt's QEMU hook:
// from libvirt's directory of QEMU hooks, where vnet is installed as a
// link (ln -s /usr/local/bin/vnet /etc/libvirt/hooks/qemu.d/vnet).
func Invoked(args []string) bool {
	return len(args) > 0 && filepath.Base(filepath.Dir(args[0])) == "qemu.d"
}

// Main runs the hook for libvirt's arguments (the domain's name, the
// operation, its sub-operation and an extra argument) and the domain's XML
// on standard input, and exits: 0 when done, or with nothing to do; 1 with
// the reason on standard error, which libvirt shows with its own error
// (a domain whose TAPs cannot join does not start).
func Main() {
	if err := Run(context.Background(), os.Args[1:], os.Stdin, open); err != nil {
		fmt.Fprintf(os.Stderr, "vnet: %v\n", err)
		os.Exit(1)
	}
}

// backend is what the hook asks of the service.
type backend interface {
	service.Attacher
	Close() error
}

// open is the service where the domain's metadata says the
// infrastructure is: this machine's state directory (else VNET_STATE_DIR,
// else /var/lib/vnet; libvirt runs hooks with little of its environment),
// or a cluster's etcd, whose agent on this host realizes the change.
func open(site service.AttachSite) (backend, error) {
	return service.OpenAttachSite(site), nil
}

// Run does what the operation asks of the domain: "started" attaches its
// TAPs, "stopped" and "release" take them out (either may come alone, and
// taking out twice is no error); every other operation, and a domain whose
// metadata has no element of vnet's, is left alone.
func Run(ctx context.Context, args []string, stdin io.Reader, open func(service.AttachSite) (backend, error)) error {
	if len(args) < 2 {
		return fmt.Errorf("libvirt hook: want the domain, the operation and its sub-operation as arguments, got %q", args)
	}
	op := args[1]
	data, err := io.ReadAll(io.LimitReader(stdin, maxXML+1))
	if err != nil {
		return fmt.Errorf("libvirt hook: read the domain's XML: %w", err)
	}
	if op != "started" && op != "stopped" && op != "release" {
		return nil
	}
	if len(data) > maxXML {
		return fmt.Errorf("libvirt hook: the domain's XML is over %d bytes", maxXML)
	}
	// Once QEMU is gone, libvirt may pass the interfaces without their
	// TAPs: taking the TAPs out needs only their names, from the metadata.
	g, err := parse(data, op == "started")
	if err != nil || g == nil {
		return err
	}
	svc, err := open(g.Site)
	if err != nil {
		return err
	}
	defer svc.Close()
	if op == "started" {
		return attach(ctx, svc, g)
	}
	return detach(ctx, svc, g)
}

// attach puts each of the guest's TAPs on its port group or network; when
// one fails, those attached before it are taken out again.
func attach(ctx context.Context, svc backend, g *Guest) error {
	for i, n := range g.NICs {
		_, err := svc.Attach(ctx, service.AttachRequest{Infra: g.Infra, Host: g.Host, Container: g.UUID, Guest: g.Domain,
			Tap: n.Tap, Ifname: n.Tap, PortGroup: n.PortGroup, Network: n.Network, MAC: n.MAC, Wait: g.Wait})
		if err != nil {
			undo := &Guest{Infra: g.Infra, UUID: g.UUID, Wait: g.Wait, NICs: g.NICs[:i]}
			return errors.Join(fmt.Errorf("domain %s: put TAP %s on %s%s of %s: %w", g.Domain, n.Tap, n.PortGroup, n.Network, g.Infra, err),
				detach(ctx, svc, undo))
		}
	}
	return nil
}

// detach takes each of the guest's TAPs out of the infrastructure.
func detach(ctx context.Context, svc backend, g *Guest) error {
	var errs []error
	for _, n := range g.NICs {
		if _, err := svc.Detach(ctx, service.DetachRequest{Infra: g.Infra, Container: g.UUID, Ifname: n.Tap, Wait: g.Wait}); err != nil {
			errs = append(errs, fmt.Errorf("domain %s: take TAP %s out of %s: %w", g.Domain, n.Tap, g.Infra, err))
		}
	}
	return errors.Join(errs...)
}

// Guest is what a domain's XML asks of vnet.
type Guest struct {
	Domain, UUID string
	Infra, Host  string
	// Site is where the infrastructure is: a state directory, or a
	// cluster's etcd.
	Site service.AttachSite
	Wait time.Duration
	NICs []NIC
}

// NIC is one of the domain's TAPs and where it goes.
type NIC struct {
	Tap, MAC           string
	PortGroup, Network string
}

// domainXML is the part of libvirt's domain XML that the hook reads.
type domainXML struct {
	Name       string         `xml:"name"`
	UUID       string         `xml:"uuid"`
	Interfaces []interfaceXML `xml:"devices>interface"`
	Vnet       *metadataXML   `xml:"metadata>vnet"`
}

type interfaceXML struct {
	Type   string `xml:"type,attr"`
	MAC    attr   `xml:"mac"`
	Target struct {
		Dev string `xml:"dev,attr"`
	} `xml:"target"`
}

type attr struct {
	Address string `xml:"address,attr"`
}

// metadataXML is vnet's element in <metadata>:
//
//	<vnet:vnet xmlns:vnet="https://github.com/vnet-project/vnet/libvirt" infra="lab">
//	  <vnet:interface dev="tap-guest1" portgroup="pg-web"/>
//	</vnet:vnet>
type metadataXML struct {
	XMLName    xml.Name
	Infra      string `xml:"infra,attr"`
	Host       string `xml:"host,attr"`
	StateDir   string `xml:"stateDir,attr"`
	Etcd       string `xml:"etcd,attr"` // endpoints, separated by commas
	EtcdCA     string `xml:"etcdCA,attr"`
	EtcdCert   string `xml:"etcdCert,attr"`
	EtcdKey    string `xml:"etcdKey,attr"`
	Wait       string `xml:"wait,attr"`
	Interfaces []struct {
		Dev       string `xml:"dev,attr"`
		PortGroup string `xml:"portgroup,attr"`
		Network   string `xml:"network,attr"`
	} `xml:"interface"`
}

// Parse reads what a domain's XML asks of vnet: nil when its metadata has
// no element of vnet's namespace. Each <vnet:interface> names, by its
// target dev, an <interface type='ethernet'> of the domain, whose MAC
// becomes the vNIC's (the one port security lets the guest send from).
func Parse(data []byte) (*Guest, error) {
	return parse(data, true)
}

// parse reads the domain's XML; with strict false, a TAP that the domain's
// interfaces lack is taken from the metadata alone, without its MAC.
func parse(data []byte, strict bool) (*Guest, error) {
	var d domainXML
	if err := xml.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("libvirt hook: the domain's XML: %w", err)
	}
	m := d.Vnet
	if m == nil || m.XMLName.Space != Namespace {
		return nil, nil
	}
	where := fmt.Sprintf("domain %s: <metadata> vnet", d.Name)
	g := &Guest{Domain: d.Name, UUID: d.UUID, Infra: m.Infra, Host: m.Host, Wait: DefaultWait,
		Site: service.AttachSite{StateDir: m.StateDir, TLS: service.TLSFiles{CA: m.EtcdCA, Cert: m.EtcdCert, Key: m.EtcdKey}}}
	switch {
	case d.UUID == "":
		return nil, fmt.Errorf("domain %s has no <uuid>", d.Name)
	case m.Infra == "":
		return nil, fmt.Errorf("%s: infra= names no infrastructure", where)
	case len(m.Interfaces) == 0:
		return nil, fmt.Errorf("%s: no <vnet:interface dev=... portgroup=...> says which TAP goes where", where)
	}
	if err := etcdOf(m, &g.Site); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if m.Wait != "" {
		w, err := time.ParseDuration(m.Wait)
		if err != nil || w <= 0 {
			return nil, fmt.Errorf("%s: wait=%q is not a duration such as 30s", where, m.Wait)
		}
		g.Wait = w
	}
	for i, mi := range m.Interfaces {
		at := fmt.Sprintf("%s, interface %d", where, i+1)
		if mi.Dev == "" || (mi.PortGroup == "") == (mi.Network == "") {
			return nil, fmt.Errorf("%s: give dev= and one of portgroup= and network=", at)
		}
		n, err := tapOf(d.Interfaces, mi.Dev)
		if err != nil && strict {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		n.Tap = mi.Dev
		n.PortGroup, n.Network = mi.PortGroup, mi.Network
		g.NICs = append(g.NICs, n)
	}
	return g, nil
}

// tapOf finds the domain's interface whose TAP is dev.
func tapOf(ifaces []interfaceXML, dev string) (NIC, error) {
	for _, in := range ifaces {
		if in.Target.Dev != dev {
			continue
		}
		if in.Type != "ethernet" {
			return NIC{}, fmt.Errorf("interface %s is of type %q: vnet takes the TAP of an <interface type='ethernet'>", dev, in.Type)
		}
		if in.MAC.Address == "" {
			return NIC{}, fmt.Errorf("interface %s has no <mac address=...>", dev)
		}
		return NIC{Tap: dev, MAC: strings.ToLower(in.MAC.Address)}, nil
	}
	return NIC{}, fmt.Errorf("the domain has no <interface type='ethernet'> with <target dev='%s'/>", dev)
}

// etcdOf reads the cluster's etcd from the metadata: its endpoints, and
// the TLS files, which go only with endpoints, a certificate with its key.
func etcdOf(m *metadataXML, site *service.AttachSite) error {
	for _, e := range strings.Split(m.Etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			site.Etcd = append(site.Etcd, e)
		}
	}
	switch {
	case len(site.Etcd) == 0 && (m.EtcdCA != "" || m.EtcdCert != "" || m.EtcdKey != ""):
		return errors.New("etcdCA=, etcdCert= and etcdKey= go with etcd=, the cluster's endpoints")
	case (m.EtcdCert == "") != (m.EtcdKey == ""):
		return errors.New("etcdCert= and etcdKey= go together")
	}
	return nil
}
