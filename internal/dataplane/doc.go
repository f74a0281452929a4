// Package dataplane realizes plans on Linux. With its parts it is the only
// code of vnet that talks to the kernel, through netlink
// (vishvananda/netlink and netns), nftables, ethtool ioctls, BPF and the
// cgroup filesystem; it never runs ip(8), tc(8) or nft(8).
//
// Its parts, each a package of its own:
//
//	nsthread  running code on a thread inside a namespace (the only way in)
//	rtnl      route netlink requests the netlink library lacks
//	nft       the firewalls and port policies, in nftables
//	feature   the error for a kernel feature this machine lacks
//
// Every operation is idempotent: creating what exists, or removing what is
// gone, succeeds. Each function's comment names the iproute2 command it is
// equivalent to, so that a reader who knows ip and tc sees what it does.
//
// Namespaces are reached through per-namespace netlink handles (no thread
// switching) except where the kernel interface is bound to the calling
// thread's namespace (creating a namespace, ethtool ioctls, exec), which goes
// through inNS (nsthread) on a locked OS thread.
package dataplane
