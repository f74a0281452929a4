#!/usr/bin/env bash
# cluster-lab.sh: a vnet cluster of N "machines" on this one box, to try the
# three-host walk-through of docs/cluster.md without three hosts.
#
#   scripts/cluster-lab.sh up [N]      # N machines hv1..hvN (default 3), etcd, an agent on each
#   scripts/cluster-lab.sh ctl CMD...  # run CMD where an operator would (reaches etcd at 10.0.0.1)
#   scripts/cluster-lab.sh on HOST CMD...  # run CMD on machine HOST (hv1, ...)
#   scripts/cluster-lab.sh status      # what runs
#   scripts/cluster-lab.sh down        # stop everything, remove every namespace it made
#
# Each machine is a network namespace vnetlab-hvI with eth0 at 10.0.0.1I/24 on
# an underlay bridge (namespace vnetlab-ul); `vnet server` serves etcd at
# 10.0.0.1:2379 in namespace vnetlab-ctl; `vnet agent host --host hvI` runs
# inside each machine's namespace, so from the agent's view that namespace is
# the host. Nothing is made in the root namespace. Needs root, ip(8) and
# nsenter(1); VNET names the vnet binary (default: vnet on PATH, else one
# built from this checkout). State, logs and etcd's data: /run/vnet-cluster-lab.
set -euo pipefail

DIR=${VNET_CLUSTER_LAB_DIR:-/run/vnet-cluster-lab}
P=vnetlab
UL=$P-ul
CTL=$P-ctl
ETCD=http://10.0.0.1:2379

die() { echo "cluster-lab: $*" >&2; exit 1; }

vnet_bin() {
  if [ -n "${VNET:-}" ]; then echo "$VNET"; return; fi
  if [ -x "$DIR/vnet" ]; then echo "$DIR/vnet"; return; fi
  if command -v vnet >/dev/null; then command -v vnet; return; fi
  local root; root=$(cd "$(dirname "$0")/.." && pwd)
  echo "cluster-lab: building vnet from $root" >&2
  (cd "$root" && go build -o "$DIR/vnet" ./cmd/vnet) || die "go build failed; set VNET=/path/to/vnet"
  echo "$DIR/vnet"
}

attach() { # namespace address: eth0 on the underlay bridge
  local ns=$1 ip=$2 port=u${2##*.}
  ip netns add "$ns"
  ip -n "$UL" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$UL" link set "$port" master ul up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
}

in_ns() { local ns=$1; shift; nsenter --net=/run/netns/"$ns" "$@"; }

start() { # name namespace args...: a background process with its pid and log in DIR
  local name=$1 ns=$2; shift 2
  # nsenter execs the command, so the pid recorded is the command's own.
  nsenter --net=/run/netns/"$ns" "$@" >"$DIR/$name.log" 2>&1 &
  echo $! >"$DIR/$name.pid"
}

up() {
  local n=${1:-3}
  [ "$(id -u)" = 0 ] || die "needs root"
  [[ "$n" =~ ^[1-9]$ ]] || die "N is 1..9"
  [ ! -e "$DIR/machines" ] || die "a cluster lab runs already ($DIR); cluster-lab.sh down first"
  mkdir -p "$DIR"
  local bin; bin=$(vnet_bin)
  echo "$bin" >"$DIR/bin"
  ip netns add "$UL"
  ip -n "$UL" link add ul type bridge
  ip -n "$UL" link set ul up
  attach "$CTL" 10.0.0.1
  : >"$DIR/machines"
  for i in $(seq 1 "$n"); do
    attach "$P-hv$i" "10.0.0.1$i"
    echo "hv$i" >>"$DIR/machines"
  done
  start server "$CTL" "$bin" server --no-api --data-dir "$DIR/etcd" --listen-client 10.0.0.1:2379 \
    --listen-peer 127.0.0.1:2380 --state-dir "$DIR/ctl"
  for _ in $(seq 1 100); do
    grep -q '^VNET_ETCD=' "$DIR/server.log" 2>/dev/null && break
    sleep 0.2
  done
  grep -q '^VNET_ETCD=' "$DIR/server.log" || die "vnet server did not start: $(cat "$DIR/server.log")"
  for h in $(cat "$DIR/machines"); do
    start "agent-$h" "$P-$h" "$bin" agent host --etcd "$ETCD" --host "$h" --state-dir "$DIR/state-$h"
  done
  cat <<EOT
cluster lab up: etcd at $ETCD, machines $(paste -sd' ' "$DIR/machines") (10.0.0.11...) with an agent each
  $0 ctl vnet apply --etcd $ETCD examples/cluster/three-hosts.yaml
  $0 ctl vnet status --etcd $ETCD dc
  ip netns exec vnet.dc.web1 ping -c 3 172.16.0.2
  $0 ctl vnet destroy --etcd $ETCD dc
  $0 down
logs: $DIR/*.log
EOT
}

stop_pid() {
  local f=$1
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  [ "$(id -u)" = 0 ] || die "needs root"
  for f in "$DIR"/agent-*.pid; do [ -e "$f" ] && stop_pid "$f"; done
  stop_pid "$DIR/server.pid"
  # The agents' VMs: namespaces whose mark names one of the agents' state
  # directories (ip -n NS link show lo: alias vnet:INFRA:STORE:DIR).
  for ns in $(ip netns list | awk '/^vnet\./ {print $1}'); do
    if ip -n "$ns" link show lo 2>/dev/null | grep -q "alias vnet:.*:$DIR/state-"; then
      ip netns del "$ns"
    fi
  done
  if [ -f "$DIR/machines" ]; then
    for h in $(cat "$DIR/machines"); do ip netns del "$P-$h" 2>/dev/null || true; done
  fi
  ip netns del "$CTL" 2>/dev/null || true
  ip netns del "$UL" 2>/dev/null || true
  rm -rf "$DIR"
  echo "cluster lab down"
}

status() {
  [ -f "$DIR/machines" ] || { echo "no cluster lab runs"; return; }
  for f in "$DIR"/*.pid; do
    local name; name=$(basename "$f" .pid)
    if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$name: running"; else echo "$name: stopped (see $DIR/$name.log)"; fi
  done
}

cmd=${1:-}
shift || true
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  ctl) [ $# -gt 0 ] || die "ctl CMD..."; if [ "$1" = vnet ]; then shift; set -- "$(cat "$DIR/bin")" "$@"; fi; in_ns "$CTL" "$@" ;;
  on) [ $# -gt 1 ] || die "on HOST CMD..."; h=$1; shift; if [ "$1" = vnet ]; then shift; set -- "$(cat "$DIR/bin")" "$@"; fi; in_ns "$P-$h" "$@" ;;
  *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
