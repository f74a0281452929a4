#!/bin/sh
# The tenant walk-through of docs/networks.md on one machine: three
# "hypervisors" as network namespaces on an underlay bridge (192.0.2.0/24),
# vnet server in a fourth, an agent in each hypervisor. Run as root from the
# repository after `make build`; everything goes at the end (or on error).
#   scripts/networks-walkthrough.sh [bin/vnet]
set -eu
VNET=$(realpath "${1:-bin/vnet}")
SPEC=$(realpath examples/networks/two-tenants.yaml)
WORK=$(mktemp -d /tmp/vnet-tenants.XXXXXX)
PREFIX=wt INFRA=tenants EXTRA_NS="p1 p2"
. "$(dirname "$0")/walkthrough-cluster.sh"
trap wt_cleanup EXIT INT TERM
wt_up
vnet apply --wait=20s "$SPEC" # returns once hv1, hv2 and hv3 report it current
vnet status tenants

# Each VM's default route goes through its network's gateway.
for vm in a-web1 a-web2 b-web1 b-web2; do ip -n vnet.tenants.$vm route add default via 10.1.0.1; done
ip -n vnet.tenants.a-db1 route add default via 10.2.0.1

# A netserver in each VM (vnet netserver; any TCP service would do).
for vm in a-web2 a-db1 b-web2; do
	ip netns exec vnet.tenants.$vm "$VNET" netserver -D >/dev/null 2>&1 &
	PIDS="$PIDS $!"
done
sleep 0.5
rr() { # from-vm address: a one-second TCP request/response test
	timeout 10 ip netns exec vnet.tenants.$1 "$VNET" netperf -H "$2" -l 1 -t TCP_RR -P 0
}

set -x
rr a-web1 10.1.0.12        # a-web1 (hv1) -> a-web2 (hv2): one network across hosts
rr a-web1 10.2.0.13        # a-web1 (hv1) -> a-db1 (hv3): routed by ta on hv1
rr b-web1 10.1.0.12        # b-web1 (hv1) -> b-web2 (hv2): the same address in the other tenant
! rr b-web1 10.2.0.13      # tenant b has no route into tenant a
! rr a-web1 192.0.2.1      # nor does a VM reach the underlay or etcd
ip -n vnet.tenants.a-web2 -s link show eth0   # a-web2's counters: a's test to 10.1.0.12
ip -n vnet.tenants.b-web2 -s link show eth0   # b-web2's: b's test only
set +x

if [ -n "${THROUGHPUT:-}" ]; then
	# The plain path: one veth pair between two namespaces, the same MTU.
	ip netns add wt-p1
	ip netns add wt-p2
	ip -n wt-p1 link add eth0 mtu 1450 type veth peer name eth0 netns wt-p2 mtu 1450
	ip -n wt-p1 addr add 10.99.0.1/24 dev eth0
	ip -n wt-p2 addr add 10.99.0.2/24 dev eth0
	ip -n wt-p1 link set eth0 up
	ip -n wt-p2 link set eth0 up
	ip -n wt-p2 link set lo up
	ip netns exec wt-p2 "$VNET" netserver -D >/dev/null 2>&1 &
	PIDS="$PIDS $!"
	sleep 0.5
	stream() { # namespace address -> Mbit/s
		ip netns exec "$1" "$VNET" netperf -H "$2" -l "$THROUGHPUT" -t TCP_STREAM -P 0 -f m | awk 'NF >= 5 {print $NF; exit}'
	}
	for round in 1 2; do
		plain=$(stream wt-p1 10.99.0.2)
		net=$(stream vnet.tenants.a-web1 10.1.0.12)
		routed=$(stream vnet.tenants.a-web1 10.2.0.13)
		echo "round $round: TCP_STREAM Mbit/s: plain veth $plain, one network hv1->hv2 $net ($(echo "$net $plain" | awk '{printf "%.2f", $1/$2}') of plain), routed a-web hv1 -> a-db hv3 $routed ($(echo "$routed $plain" | awk '{printf "%.2f", $1/$2}') of plain)"
	done
fi

vnet destroy --wait=20s tenants # returns once no host reports it
for i in $(seq 100); do
	[ -z "$(ip netns list | grep '^vnet\.tenants\.' || true)" ] && break
	sleep 0.2
done
echo "walk-through done"
