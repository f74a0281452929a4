#!/usr/bin/env python3
"""Virtual networks at scale over a three-machine cluster on this machine.

Runs TestClusterNetworksScale of internal/clustertest (three machine
namespaces on a test underlay, vnet server and an agent in each) for each
size: N networks with two VMs each, on two of the three hosts. Prints, per
size, the apply from empty until every host reports it, adding one network
(each timed as `vnet apply --wait`, which watches the agents' reports in
etcd and prints when each host became current; the addition starts once
the kernel is quiet), the kernel objects a host holds per network it
carries, and destroy.

usage: bench/networks.py [--sizes 300,1000] [--ports netns|tap] [--routed] [--throughput SECONDS] [--vnet bin/vnet]

--ports tap makes each VM a hypervisor's guest: its vNIC is a TAP that the
test makes on its host before the apply (as QEMU's host set-up would) and
the spec attaches (attach: {tap: NAME}), not a namespace of its own. The
default, netns, makes each VM a namespace with a veth pair.

VNET_NETWORKS_ONLY_APPLY=1 in the environment ends each size after the
apply from empty (its time, the kernel objects per network and each
agent's first pass, with what each kind of step took), and
VNET_NETWORKS_APPLY_WAIT (a Go duration, 20m by default) bounds the wait
for it.

--throughput runs scripts/networks-walkthrough.sh instead, with
THROUGHPUT=SECONDS: TCP_STREAM within a network across two hosts, through
the distributed router across two hosts, and over a plain veth pair between
two namespaces, in one run, as ratios against the plain pair.

Needs root and Go. It takes /tmp/vnet-kernel.lock for each size itself (do
not wrap it in flock). 1,000 networks take about three minutes; 10,000
(20,000 VM namespaces) much longer, mostly the destroy. Not a test: it prints
measurements, with the agents' traces (VNET_TRACE) of the change.
"""
import argparse, fcntl, os, re, subprocess, sys

LOCK = "/tmp/vnet-kernel.lock"


def run(size, routed, ports):
    env = dict(os.environ, VNET_NETWORKS_BENCH=str(size), VNET_NETWORKS_ROUTED="1" if routed else "0",
               VNET_NETWORKS_PORTS=ports)
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run(["go", "test", "-count=1", "-timeout", "60m", "-run", "TestClusterNetworksScale", "-v",
                            "./internal/clustertest"], env=env, capture_output=True, text=True)
    keep = False
    for l in r.stdout.splitlines():
        if "networks_bench_integration_test.go" in l:
            keep = True
            print("  " + re.sub(r"^\s*networks_bench_integration_test.go:\d+: ", "", l))
        elif keep and l.startswith("        "):
            print("    " + l.strip())
        else:
            keep = False
    if r.returncode != 0:
        print(r.stdout[-4000:], r.stderr[-2000:], file=sys.stderr)
        sys.exit(f"size {size} failed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="300,1000")
    ap.add_argument("--routed", action="store_true", help="two networks to a router")
    ap.add_argument("--ports", choices=["netns", "tap"], default="netns", help="what a VM's vNIC is")
    ap.add_argument("--throughput", type=int, default=0, metavar="SECONDS")
    ap.add_argument("--vnet", default="bin/vnet")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    if a.throughput:
        with open(LOCK, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            r = subprocess.run(["scripts/networks-walkthrough.sh", a.vnet], capture_output=True, text=True,
                               env=dict(os.environ, THROUGHPUT=str(a.throughput)))
        for l in r.stdout.splitlines():
            if l.startswith("round "):
                print(l)
        if r.returncode != 0:
            sys.exit(r.stdout[-3000:] + r.stderr[-3000:])
        return
    print(subprocess.run(["uname", "-sr"], capture_output=True, text=True).stdout.strip(), f"{os.cpu_count()} CPUs")
    for size in [int(s) for s in a.sizes.split(",")]:
        print(f"{size} networks, 2 VMs ({a.ports}) each, 3 hosts{' (routed)' if a.routed else ''}:")
        run(size, a.routed, a.ports)


if __name__ == "__main__":
    main()
