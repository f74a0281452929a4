#!/usr/bin/env python3
"""Port security and ACLs: what they cost a VM-to-VM path.

Two VMs on one host's switch; the server's port group is configured as
  none      every check accepted: no firewall at all (as before port security)
  security  vSphere's defaults plus the IP guard (forged transmits, MAC changes,
            promiscuous mode and IP spoofing rejected), no ACL
  acl-N     the same plus an ACL of N deny rules that never match (udp to
            unused ports from 192.0.2.0/24) before the allow that does, default
            deny: every new connection walks all N; replies pass by conntrack
For each, vnet netperf TCP_STREAM (throughput), TCP_RR (transactions/s on one
connection: what every packet of an established connection pays) and TCP_CRR
(a new connection per transaction: what walking the ACL costs) from the
client VM, --rounds times in alternation, best of the rounds; the ratios are
against "none" from the same run.

usage: bench/security.py [--vnet bin/vnet] [--seconds 5] [--rounds 3] [--rules 0,10,100,1000]
Needs root. Not a test: it prints measurements and ratios.
"""
import argparse, json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vnetlab import VnetLab, never_matching_acl  # noqa: E402

NAME = "benchsec"
OPEN = "{promiscuous: true, macChanges: true, forgedTransmits: true, routerAdvertisements: true}"
GUARD = "{ipSpoofing: false}"


def spec(config):
    security, acl = OPEN, ""
    if config != "none":
        security = GUARD
    if config.startswith("acl-"):
        acl = never_matching_acl(int(config[4:]), "{action: allow, direction: ingress, proto: tcp, from: {portgroup: pg-client}}")
    return f"""name: {NAME}
hosts:
  - {{name: esx1}}
switches:
  - name: sw0
    hosts: [esx1]
    portgroups:
      - name: pg-server
        security: {security}{acl}
      - name: pg-client
        security: {security}
vms:
  - {{name: server, host: esx1, nics: [{{portgroup: pg-server, ip: 10.71.0.1/24}}]}}
  - {{name: client, host: esx1, nics: [{{portgroup: pg-client, ip: 10.71.0.2/24}}]}}
"""


class Lab(VnetLab):
    def netperf(self, test, seconds):
        out = self.v("exec", "client", "--", self.vnet, "netperf", "-H", "10.71.0.1", "-t", test, "-l", str(seconds), "-P", "0", "--json")
        r = json.loads(out)["results"][0]
        return r["throughput_bps"] if test == "TCP_STREAM" else r["transactions_per_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vnet", default="bin/vnet")
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rules", default="0,10,100,1000", help="ACL sizes to measure")
    a = ap.parse_args()
    configs = ["none", "security"] + [f"acl-{n}" for n in a.rules.split(",") if n]
    lab = Lab(os.path.abspath(a.vnet))
    print(lab.machine())
    best = {c: {"TCP_STREAM": 0.0, "TCP_RR": 0.0, "TCP_CRR": 0.0} for c in configs}
    server = None
    try:
        for rnd in range(a.rounds):
            for c in configs:
                lab.apply(spec(c))
                if server is None:
                    server = subprocess.Popen([lab.vnet, "--state-dir", lab.state, "exec", "server", "--", lab.vnet, "netserver", "-D"],
                                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(0.5)
                for test in best[c]:
                    best[c][test] = max(best[c][test], lab.netperf(test, a.seconds))
            print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    finally:
        if server:
            server.terminate()
            server.wait()
        lab.destroy(NAME)
    base = best["none"]
    print(f"\n{'config':<10} {'TCP_STREAM Gbit/s':>18} {'ratio':>7} {'TCP_RR trans/s':>15} {'ratio':>7} {'TCP_CRR trans/s':>16} {'ratio':>7}")
    for c in configs:
        s, r, cr = best[c]["TCP_STREAM"], best[c]["TCP_RR"], best[c]["TCP_CRR"]
        print(f"{c:<10} {s / 1e9:>18.2f} {s / base['TCP_STREAM']:>7.3f} {r:>15.0f} {r / base['TCP_RR']:>7.3f}"
              f" {cr:>16.0f} {cr / base['TCP_CRR']:>7.3f}")
    print(f"\nbest of {a.rounds} rounds of {a.seconds} s each, configurations alternating within each round")


if __name__ == "__main__":
    main()
