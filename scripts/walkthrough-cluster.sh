# Sourced by the walk-through scripts: three "hypervisors" hv1..hv3 as
# network namespaces PREFIX-hv1.. on an underlay bridge (192.0.2.0/24,
# hosts .11-.13), vnet server on a control machine PREFIX-ctl (192.0.2.1),
# an agent on each hypervisor. Set VNET (the binary), WORK (a scratch
# directory), PREFIX and INFRA (the infrastructure whose VMs to remove at
# the end) before sourcing; AGENT_FLAGS are added to each agent's. It
# defines wt_up, wt_cleanup, and vnet (the binary on the control machine,
# given etcd).
PIDS=""
ETCD=http://192.0.2.1:2379

wt_cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	for ns in $(ip netns list | awk '{print $1}' | grep "^vnet\.$INFRA\." || true); do ip netns del "$ns"; done
	for ns in hv1 hv2 hv3 ctl ul ${EXTRA_NS:-}; do ip netns del "$PREFIX-$ns" 2>/dev/null || true; done
	rm -rf "$WORK"
}

wt_machine() { # name address
	ip netns add "$PREFIX-$1"
	ip -n "$PREFIX-ul" link add "u$1" type veth peer name eth0 netns "$PREFIX-$1"
	ip -n "$PREFIX-ul" link set "u$1" master ul up
	ip -n "$PREFIX-$1" link set lo up
	ip -n "$PREFIX-$1" addr add "$2/24" dev eth0
	ip -n "$PREFIX-$1" link set eth0 up
}

wt_up() {
	ip netns add "$PREFIX-ul"
	ip -n "$PREFIX-ul" link add ul type bridge
	ip -n "$PREFIX-ul" link set ul up
	wt_machine ctl 192.0.2.1
	wt_machine hv1 192.0.2.11
	wt_machine hv2 192.0.2.12
	wt_machine hv3 192.0.2.13
	nsenter --net=/run/netns/$PREFIX-ctl "$VNET" server --no-api --data-dir "$WORK/etcd" \
		--listen-client 192.0.2.1:2379 --state-dir "$WORK/ctl" >"$WORK/server.log" 2>&1 &
	PIDS="$PIDS $!"
	for i in $(seq 50); do grep -q VNET_ETCD= "$WORK/server.log" && break; sleep 0.2; done
	for h in hv1 hv2 hv3; do
		# shellcheck disable=SC2086 # AGENT_FLAGS are words
		nsenter --net=/run/netns/$PREFIX-$h "$VNET" agent host --etcd $ETCD --host $h \
			--state-dir "$WORK/$h" ${AGENT_FLAGS:-} >"$WORK/$h.log" 2>&1 &
		PIDS="$PIDS $!"
	done
}

vnet() { nsenter --net=/run/netns/$PREFIX-ctl "$VNET" "$@" --etcd $ETCD; }
