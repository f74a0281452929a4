#!/bin/sh
# The load balancer walk-through of docs/loadbalancers.md on one machine:
# three "hypervisors" as network namespaces on an underlay bridge
# (192.0.2.0/24), vnet server in a fourth, an agent in each hypervisor, and
# examples/networks/loadbalancer.yaml applied over them. Run as root from
# the repository after `make build` (it needs python3 for the small TCP
# server and client in the VMs); everything goes at the end (or on error).
#   scripts/lb-walkthrough.sh [bin/vnet]
set -eu
VNET=$(realpath "${1:-bin/vnet}")
SPEC=$(realpath examples/networks/loadbalancer.yaml)
WORK=$(mktemp -d /tmp/vnet-lb.XXXXXX)
# Names of this run's own: the infrastructure (the example's name with this
# shell's pid) and the machines' namespaces, so that another run, or an
# infrastructure of the user's called lbdemo, is never touched.
PREFIX=lw$$ INFRA=lbdemo-$$ AGENT_FLAGS="--counter-interval 1s"
sed "s/^name: lbdemo\$/name: $INFRA/" "$SPEC" >"$WORK/lbdemo.yaml"
SPEC=$WORK/lbdemo.yaml
. "$(dirname "$0")/walkthrough-cluster.sh"
trap wt_cleanup EXIT INT TERM
wt_up
vnet apply --wait=20s "$SPEC" # returns once hv1, hv2 and hv3 report it current

# A server on port 8080 in each backend that answers with its VM's name.
serve() { # vm
	ip netns exec vnet.$INFRA.$1 python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 8080)); s.listen(64)
while True:
    c, peer = s.accept(); c.sendall(("%s saw %s\n" % (sys.argv[1], peer[0].removeprefix("::ffff:"))).encode()); c.close()
' "$1" >/dev/null 2>&1 &
	echo $! >"$WORK/$1.pid"
	PIDS="$PIDS $!"
}
for vm in web1 web2 web3 b-web1; do serve $vm; done
sleep 3 # the first health checks, and the reports going round
ask() { # from-vm address port count: which backend answered each connection
	printf '%s -> %s port %s, %s connections: ' "$1" "$2" "$3" "$4"
	ip netns exec vnet.$INFRA.$1 python3 -c '
import socket, sys, collections
seen = collections.Counter()
for _ in range(int(sys.argv[3])):
    try:
        with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1) as c:
            seen[c.recv(100).decode().strip()] += 1
    except OSError as e:
        seen["failed: " + e.strerror] += 1
print(", ".join("%d: %s" % (n, s) for s, n in sorted(seen.items())))
' "$2" "$3" "$4"
}

ask client1 10.1.0.100 80 30     # from hv1: spread over web1, web2, web3, each seeing client1's own address
ask client2 10.1.0.100 80 30     # from hv2
ask client3 fd00:1::100 80 30    # from hv3, to the IPv6 VIP
ask b-client 10.1.0.100 80 10    # tenant b's VIP, the same address: its own backend only
echo "web2's server stops"
kill "$(cat "$WORK/web2.pid")"   # its health check fails
sleep 3
ask client1 10.1.0.100 80 30     # web1 and web3 only, none failing
vnet status "$INFRA" | sed -n '/^LOAD BALANCER/,$p'
echo "web2's server starts again"
serve web2
sleep 3
ask client3 10.1.0.100 80 30     # web2 again
sleep 1.5 # the agents report their counts every second (--counter-interval)
vnet status "$INFRA" | sed -n '/^LOAD BALANCER/,$p'

vnet destroy --wait=20s "$INFRA" # returns once no host reports it
for i in $(seq 100); do
	[ -z "$(ip netns list | grep "^vnet\\.$INFRA\\." || true)" ] && break
	sleep 0.2
done
echo "walk-through done"
