#!/usr/bin/env python3
"""Side-by-side benchmark: vnet netperf and vnet netserver against netperf
2.7.1's netperf and netserver (built from ../shared/peers), on the same path:
one veth pair between two namespaces. Each round runs every test with both
tools, alternating which goes first; the table gives medians over the rounds
and the ratio vnet / netperf of throughput (or transactions/s) and of local
and remote service demand (lower is cheaper).

Tests: TCP_STREAM with 64 KiB sends, TCP_RR, TCP_CRR, UDP_RR, all -c -C.
Both tools print the same selectors (-- -k ...), parsed the same way.

usage: bench/netperf_vs_netperf.py [--vnet bin/vnet] [--netperf-dir DIR]
                                   [--seconds 5] [--rounds 3]

--netperf-dir holds a built netperf and netserver; without it the script
builds them with ../shared/peers/build-netperf.sh into a temporary directory.
Needs root. Not a test: it asserts nothing.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

# The same path as netperf_vs_iperf3.py's: one veth pair between two namespaces.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netperf_vs_iperf3 import IP_B, NS_A, NS_B, in_ns, setup, sh, teardown  # noqa: E402

VNET_PORT, REAL_PORT = 12865, 12866
SELECT = "THROUGHPUT,THROUGHPUT_UNITS,LOCAL_SD,REMOTE_SD,LOCAL_CPU_UTIL,REMOTE_CPU_UTIL"
TESTS = [  # label, netperf arguments
    ("TCP_STREAM 64 KiB", ["-t", "TCP_STREAM", "--", "-m", "64K"]),
    ("TCP_RR", ["-t", "TCP_RR"]),
    ("TCP_CRR", ["-t", "TCP_CRR"]),
    ("UDP_RR", ["-t", "UDP_RR"]),
]


def build_netperf(tmp):
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shared = os.environ.get("VNET_SHARED", os.path.join(os.path.dirname(repo), "shared"))
    script = os.path.join(shared, "peers", "build-netperf.sh")
    if not os.path.exists(script):
        sys.exit("no %s: pass --netperf-dir or set VNET_SHARED" % script)
    sh(script, tmp)
    return tmp


def run(cmd):
    out = sh(*cmd).stdout
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {k: kv[k] for k in SELECT.split(",")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--netperf-dir")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    vnet = os.path.abspath(a.vnet)
    tmp = tempfile.mkdtemp(prefix="vnp-bench")
    try:
        nd = os.path.abspath(a.netperf_dir) if a.netperf_dir else build_netperf(tmp)
        setup()
        servers = [subprocess.Popen(in_ns(NS_B, vnet, "netserver", "-D", "-p", str(VNET_PORT)), stderr=subprocess.DEVNULL),
                   subprocess.Popen(in_ns(NS_B, nd + "/netserver", "-D", "-p", str(REAL_PORT)), stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)]
        time.sleep(1)
        common = ["-H", IP_B, "-l", str(a.seconds), "-c", "-C", "-P", "0"]
        tools = {"vnet": [vnet, "netperf", "-p", str(VNET_PORT)], "netperf": [nd + "/netperf", "-p", str(REAL_PORT)]}
        got = {(t, tool): [] for t, _ in TESTS for tool in tools}
        for rnd in range(a.rounds):
            for label, args in TESTS:
                order = ["vnet", "netperf"] if rnd % 2 == 0 else ["netperf", "vnet"]
                for tool in order:
                    test_args = list(args)
                    if "--" not in test_args:
                        test_args.append("--")
                    cmd = in_ns(NS_A, *tools[tool], *common, *test_args, "-k", SELECT)
                    got[(label, tool)].append(run(cmd))
            print("round %d of %d done" % (rnd + 1, a.rounds), file=sys.stderr)
        for s in servers:
            s.kill()
            s.wait()
    finally:
        teardown()
        shutil.rmtree(tmp, ignore_errors=True)

    def med(label, tool, key):
        return statistics.median(float(r[key]) for r in got[(label, tool)])

    print("vnet netperf/netserver against netperf 2.7.1 on a veth pair, %d s runs, medians of %d interleaved rounds, -c -C"
          % (a.seconds, a.rounds))
    print("| test | unit | vnet | netperf | ratio | local SD vnet / netperf | ratio | remote SD vnet / netperf | ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, _ in TESTS:
        unit = got[(label, "vnet")][0]["THROUGHPUT_UNITS"]
        tv, tn = med(label, "vnet", "THROUGHPUT"), med(label, "netperf", "THROUGHPUT")
        lv, ln = med(label, "vnet", "LOCAL_SD"), med(label, "netperf", "LOCAL_SD")
        rv, rn = med(label, "vnet", "REMOTE_SD"), med(label, "netperf", "REMOTE_SD")
        print("| %s | %s | %.0f | %.0f | %.2f | %.3f / %.3f | %.2f | %.3f / %.3f | %.2f |" % (
            label, unit, tv, tn, tv / tn, lv, ln, lv / ln, rv, rn, rv / rn))


if __name__ == "__main__":
    main()
