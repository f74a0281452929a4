// Package dataplane realizes plans on Linux. It is the only package of vnet
// that talks to the kernel, through netlink (vishvananda/netlink and netns),
// ethtool ioctls and the cgroup filesystem; it never runs ip(8) or tc(8).
//
// Every operation is idempotent: creating what exists, or removing what is
// gone, succeeds. Each function's comment names the iproute2 command it is
// equivalent to, so that a reader who knows ip and tc sees what it does.
//
// Namespaces are reached through per-namespace netlink handles (no thread
// switching) except where the kernel interface is bound to the calling
// thread's namespace (creating a namespace, ethtool ioctls, exec), which goes
// through inNS on a locked OS thread.
package dataplane
