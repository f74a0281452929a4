#!/usr/bin/env python3
"""What a load balancer's translation costs, and how fast hosts steer away
from a backend that fails.

Translation: one machine, `vnet apply` of a network over two hosts with two
clients on hv1 and a server on hv2 running `vnet netserver`, and a VIP with
two listeners (netperf's control port 12865 and a fixed data port 12866)
over that one server, source affinity keeping both of a client's
connections on it. In one run, round after round, TCP_RR and TCP_CRR (a
connection per transaction: each a new connection the client's port
translates)
  - from `client` to the VIP (translated on hv1's port, back on it),
  - from `direct` to the server's own address, through a port with the same
    programs (which look the packets up and pass them),
  - and, after an apply that takes the load balancer away, from `direct` to
    the server's address with no program on the port; each round applies
    the load balancer again.
The VIP's connections and the direct ones come from two clients because
the server cannot tell a VIP's connection from a direct one with the same
addresses and ports, whose TCP timestamps differ (Linux offsets them by the
addresses the client sees): a direct connection reusing the ports of a VIP's
one the server still holds in TIME_WAIT waits for a SYN to be sent again.
Prints transactions/s and the p50 latency of each, the median of the
rounds, and the ratios against the server's address without a load
balancer.

Failover: runs TestClusterLoadBalancer of internal/clustertest (three
machine namespaces, vnet server and an agent each, a VIP over three
backends, health checks every 500 ms, down after two failures) with
VNET_LB_FAILOVERS=N: N times, a backend's server stops while a client on
each machine connects every 20 ms, and the test logs when the last of them
stopped reaching it; then it starts again.

usage: bench/loadbalancer.py [--seconds 3] [--rounds 5] [--failovers 5] [--vnet bin/vnet]

Needs root and Go. Takes /tmp/vnet-kernel.lock itself (do not wrap it in
flock). About two minutes with the defaults.
"""
import argparse, fcntl, json, os, re, statistics, subprocess, sys, time

sys.path.insert(0, os.path.dirname(__file__))
from vnetlab import VnetLab  # noqa: E402

LOCK = "/tmp/vnet-kernel.lock"
NAME = "lbbench"
SPEC = """name: lbbench
hosts:
  - {name: hv1, underlay: 192.0.2.11}
  - {name: hv2, underlay: 192.0.2.12}
networks:
  - name: net
    subnet: 10.1.0.0/24
LB
vms:
  - {name: client, host: hv1, nics: [{network: net, ip: 10.1.0.21/24}]}
  - {name: direct, host: hv1, nics: [{network: net, ip: 10.1.0.22/24}]}
  - {name: server, host: hv2, nics: [{network: net, ip: 10.1.0.11/24}]}
"""
LB = """    loadBalancers:
      - name: np
        vip: 10.1.0.100
        listeners: [{protocol: tcp, port: 12865}, {protocol: tcp, port: 12866}]
        backends: [{vm: server}]
        selection: {method: source}
"""


def netperf(lab, client, test, host, seconds):
    out = lab.v("exec", client, "--", "vnet", "netperf", "-H", host, "-t", test, "-l", str(seconds), "-j",
                "--json", "--", "-P", ",12866")
    r = json.loads(out)["results"][0]
    return r["transactions_per_s"], r["latency"]["p50_us"]


def translation(a):
    lab = VnetLab(a.vnet)
    rows = {}  # case -> list of (tps, p50)
    server = None
    order = [("TCP_RR", "VIP"), ("TCP_RR", "address"), ("TCP_CRR", "VIP"), ("TCP_CRR", "address")]
    try:
        lab.apply(SPEC.replace("LB\n", LB))
        server = subprocess.Popen([lab.vnet, "--state-dir", lab.state, "exec", "server", "--", "vnet", "netserver", "-D"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        for rnd in range(a.rounds):
            if rnd > 0:
                lab.apply(SPEC.replace("LB\n", LB))
            for test, to in (order if rnd % 2 == 0 else order[::-1]):
                client, host = ("client", "10.1.0.100") if to == "VIP" else ("direct", "10.1.0.11")
                rows.setdefault((test, to), []).append(netperf(lab, client, test, host, a.seconds))
            lab.apply(SPEC.replace("LB\n", ""))  # the programs leave the clients' ports
            for test in ("TCP_RR", "TCP_CRR"):
                rows.setdefault((test, "address, no load balancer"), []).append(
                    netperf(lab, "direct", test, "10.1.0.11", a.seconds))
        lab.apply(SPEC.replace("LB\n", LB))
        status = lab.v("status", NAME)
    finally:
        if server:
            server.kill()
        lab.destroy(NAME)
    print(lab.machine())
    print(f"{a.rounds} rounds of {a.seconds} s, in turns; medians")
    print(f"{'test':8} {'to':28} {'trans/s':>10} {'p50 us':>8} {'ratio':>6}")
    for test in ("TCP_RR", "TCP_CRR"):
        base = statistics.median(t for t, _ in rows[(test, "address, no load balancer")])
        for to in ("address, no load balancer", "address", "VIP"):
            tps = statistics.median(t for t, _ in rows[(test, to)])
            p50 = statistics.median(p for _, p in rows[(test, to)])
            print(f"{test:8} {to:28} {tps:10.0f} {p50:8.1f} {tps / base:6.2f}")
    return status


def failovers(a):
    env = dict(os.environ, VNET_LB_FAILOVERS=str(a.failovers))
    r = subprocess.run(["go", "test", "-count=1", "-timeout", "20m", "-run", "TestClusterLoadBalancer$", "-v",
                        "./internal/clustertest"], env=env, capture_output=True, text=True)
    times = []
    for l in r.stdout.splitlines():
        m = re.search(r"the last host steered away (\S+) after", l)
        if m:
            times.append(m.group(1))
            print("  " + l.strip())
    if r.returncode != 0:
        print(r.stdout[-4000:], r.stderr[-2000:], file=sys.stderr)
        sys.exit("TestClusterLoadBalancer failed")
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--failovers", type=int, default=5)
    ap.add_argument("--vnet", default="bin/vnet")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root")
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        translation(a)
        if a.failovers > 0:
            print(f"\nfailover: a backend's server stops; the time until the last of three hosts stops sending it new connections")
            failovers(a)


if __name__ == "__main__":
    main()
