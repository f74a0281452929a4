package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/vnet-project/vnet/internal/service"
)

// cmdAdd attaches the container: IPAM first (a delegated plugin's, or
// vnet's inside the attach), then the vNIC, then the routes IPAM gave.
// Whatever fails after IPAM gave addresses gives them back.
func cmdAdd(args *skel.CmdArgs) error {
	conf, err := loadConf(args.StdinData, true)
	if err != nil {
		return err
	}
	if len(conf.RuntimeConfig.PortMappings) > 0 {
		return types.NewError(types.ErrUnsupportedField,
			"portMappings: vnet maps no ports; chain the portmap plugin after vnet in the configuration list and give it the portMappings capability", "")
	}
	netns, err := netnsName(args.Netns)
	if err != nil {
		return err
	}
	shape, err := shaping(conf.RuntimeConfig.Bandwidth)
	if err != nil {
		return err
	}
	wait, _ := conf.wait()
	ctx, cancel := conf.context()
	defer cancel()
	podNS, pod := podArgs(args.Args)
	req := service.AttachRequest{Infra: conf.Infra, Host: conf.Host, Container: args.ContainerID, PodNamespace: podNS, PodName: pod,
		CNI: conf.Name, Netns: netns, Ifname: args.IfName, PortGroup: conf.PortGroup, Network: conf.Network,
		MAC: conf.RuntimeConfig.MAC, Shaping: shape, Wait: wait}
	if req.MAC != "" {
		if _, err := net.ParseMAC(req.MAC); err != nil {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("mac %q: %v", req.MAC, err), "")
		}
	}
	result := &current.Result{CNIVersion: current.ImplementedSpecVersion, DNS: conf.DNS}
	switch {
	case conf.delegated():
		r, err := invoke.DelegateAdd(ctx, conf.IPAM.Type, args.StdinData, nil)
		if err != nil {
			return err // the IPAM plugin's own error
		}
		ipam, err := current.NewResultFromResult(r)
		if err != nil {
			_ = ipamDel(ctx, conf, args.StdinData)
			return types.NewError(types.ErrDecodingFailure, "IPAM "+conf.IPAM.Type+"'s result: "+err.Error(), "")
		}
		for _, ip := range ipam.IPs {
			req.IPs = append(req.IPs, ip.Address.String())
		}
		result.Routes = ipam.Routes
		if !ipam.DNS.IsEmpty() {
			result.DNS = ipam.DNS
		}
		result.IPs = ipam.IPs
	case conf.IPAM.Type == IPAMType:
		req.IPs, req.Allocate = conf.RuntimeConfig.IPs, true
	default:
		req.IPs = conf.RuntimeConfig.IPs
	}
	a, err := attach(ctx, conf, req)
	if err != nil {
		_ = ipamDel(ctx, conf, args.StdinData)
		return err
	}
	if err := describe(result, a, args.Netns, conf.delegated()); err != nil {
		return err
	}
	var routes []service.ContainerRoute
	for _, r := range result.Routes {
		gw := ""
		if r.GW != nil {
			gw = r.GW.String()
		}
		routes = append(routes, service.ContainerRoute{Dst: r.Dst.String(), Gateway: gw})
	}
	if err := service.SetContainerRoutes(netns, a.Ifname, routes); err != nil {
		return cniError("routes of "+a.Ifname, err)
	}
	return types.PrintResult(result, conf.CNIVersion)
}

// attach asks the back end for the vNIC.
func attach(ctx context.Context, conf *NetConf, req service.AttachRequest) (*service.AttachResult, error) {
	b, err := open(conf)
	if err != nil {
		return nil, cniError("open "+conf.Infra, err)
	}
	defer b.Close()
	a, err := b.Attach(ctx, req)
	if err != nil {
		return nil, cniError("attach to "+conf.Infra, err)
	}
	return a, nil
}

// describe fills a result with the attachment: the switch port on the host
// and the vNIC in the container, its addresses (vnet's, when IPAM did not
// give them) and default routes through the port group's gateways.
func describe(r *current.Result, a *service.AttachResult, sandbox string, fromIPAM bool) error {
	r.Interfaces = []*current.Interface{{Name: a.Port}, {Name: a.Ifname, Mac: a.MAC, Sandbox: sandbox}}
	if fromIPAM {
		for _, ip := range r.IPs {
			ip.Interface = current.Int(1)
		}
		return nil
	}
	ips, err := ipNets(a.IPs)
	if err != nil {
		return types.NewError(types.ErrInternal, err.Error(), "")
	}
	for _, gw := range a.Gateways {
		g := net.ParseIP(gw)
		for _, ip := range ips {
			if (ip.Address.IP.To4() == nil) == (g.To4() == nil) {
				ip.Gateway = g
				dst := "0.0.0.0/0"
				if g.To4() == nil {
					dst = "::/0"
				}
				_, d, _ := net.ParseCIDR(dst)
				r.Routes = append(r.Routes, &types.Route{Dst: *d, GW: g})
			}
		}
	}
	r.IPs = ips
	return nil
}

// cmdDel detaches the container, if it is attached, and gives back what a
// delegated IPAM plugin gave it. It succeeds for a container never added,
// twice, and after its namespace is gone.
func cmdDel(args *skel.CmdArgs) error {
	return withBackend(args.StdinData, func(ctx context.Context, conf *NetConf, wait time.Duration, b backend) error {
		_, err := b.Detach(ctx, service.DetachRequest{Infra: conf.Infra, Container: args.ContainerID, Ifname: args.IfName, CNI: conf.Name, Wait: wait})
		if err != nil && !errors.Is(err, service.ErrNotFound) {
			return cniError("detach from "+conf.Infra, err)
		}
		return ipamDel(ctx, conf, args.StdinData)
	})
}

// withBackend runs use with the configuration (which need not name a port
// group or network), its wait, a context bounded by it, and the back end
// it names.
func withBackend(stdin []byte, use func(ctx context.Context, conf *NetConf, wait time.Duration, b backend) error) error {
	conf, err := loadConf(stdin, false)
	if err != nil {
		return err
	}
	wait, _ := conf.wait()
	ctx, cancel := conf.context()
	defer cancel()
	b, err := open(conf)
	if err != nil {
		return cniError("open "+conf.Infra, err)
	}
	defer b.Close()
	return use(ctx, conf, wait, b)
}

// cmdCheck checks that the container's vNIC is as its ADD left it: in the
// applied spec, in the kernel, with the addresses the runtime was given.
func cmdCheck(args *skel.CmdArgs) error {
	conf, err := loadConf(args.StdinData, true)
	if err != nil {
		return err
	}
	if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
		return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
	}
	ctx, cancel := conf.context()
	defer cancel()
	if conf.delegated() {
		if err := invoke.DelegateCheck(ctx, conf.IPAM.Type, args.StdinData, nil); err != nil {
			return err
		}
	}
	b, err := open(conf)
	if err != nil {
		return cniError("open "+conf.Infra, err)
	}
	defer b.Close()
	a, err := b.Attachment(ctx, service.DetachRequest{Infra: conf.Infra, Container: args.ContainerID, Ifname: args.IfName, CNI: conf.Name})
	if errors.Is(err, service.ErrNotFound) {
		return types.NewError(types.ErrUnknownContainer, err.Error(), "")
	}
	if err != nil {
		return cniError("check "+args.IfName, err)
	}
	if !a.Up {
		return types.NewError(types.ErrInternal, fmt.Sprintf("%s of container %s (VM %s): %s", a.Ifname, args.ContainerID, a.VM, a.Problem), "")
	}
	if conf.PrevResult == nil {
		return nil
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "prevResult: "+err.Error(), "")
	}
	return matchPrev(prev, a)
}

// matchPrev checks what the runtime was told against the attachment.
func matchPrev(prev *current.Result, a *service.AttachResult) error {
	var found bool
	for _, i := range prev.Interfaces {
		if i.Name == a.Ifname && i.Sandbox != "" {
			found = true
			if i.Mac != "" && i.Mac != a.MAC {
				return types.NewError(types.ErrInternal, fmt.Sprintf("%s has MAC %s, the runtime was told %s", a.Ifname, a.MAC, i.Mac), "")
			}
		}
	}
	if !found {
		return types.NewError(types.ErrInternal, fmt.Sprintf("prevResult has no interface %s in the container", a.Ifname), "")
	}
	for _, ip := range prev.IPs {
		if !slices.Contains(a.IPs, ip.Address.String()) {
			return types.NewError(types.ErrInternal, fmt.Sprintf("%s has %v, the runtime was told %s", a.Ifname, a.IPs, ip.Address.String()), "")
		}
	}
	return nil
}

// cmdGC takes out the vNICs this network attached that the runtime no
// longer uses, gives back their addresses to a delegated IPAM plugin, and
// lets that plugin collect its own.
func cmdGC(args *skel.CmdArgs) error {
	return withBackend(args.StdinData, func(ctx context.Context, conf *NetConf, wait time.Duration, b backend) error {
		req := service.CollectRequest{Infra: conf.Infra, CNI: conf.Name, Wait: wait}
		for _, k := range conf.ValidAttachments {
			req.Keep = append(req.Keep, service.AttachmentKey{Container: k.ContainerID, Ifname: k.IfName})
		}
		if _, err := b.CollectAttachments(ctx, req); err != nil && !errors.Is(err, service.ErrNotFound) {
			return cniError("collect "+conf.Name+"'s attachments in "+conf.Infra, err)
		}
		if conf.delegated() {
			// An IPAM plugin of an older specification knows no GC: what it
			// gave the vNICs taken out stays with it until their DEL.
			if err := invoke.DelegateGC(ctx, conf.IPAM.Type, args.StdinData, nil); err != nil && !incompatible(err) {
				return err
			}
		}
		return nil
	})
}

// incompatible reports whether a delegated plugin refused the command for
// its specification version.
func incompatible(err error) bool {
	var te *types.Error
	return errors.As(err, &te) && te.Code == types.ErrIncompatibleCNIVersion
}

// cmdStatus says whether ADD can be served: the infrastructure is applied
// and its store (or etcd) answers.
func cmdStatus(args *skel.CmdArgs) error {
	conf, err := loadConf(args.StdinData, true)
	if err != nil {
		return err
	}
	ctx, cancel := conf.context()
	defer cancel()
	b, err := open(conf)
	if err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	defer b.Close()
	if _, err := b.Get(ctx, conf.Infra); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, fmt.Sprintf("infrastructure %s: %v", conf.Infra, err), "")
	}
	if len(conf.Etcd) == 0 && conf.Server == "" {
		if err := service.CheckKernel(); err != nil {
			return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
		}
	}
	return nil
}
