#!/usr/bin/env bash
# The tour behind `make demo`: build an infrastructure from
# examples/demo.yaml, show it, send traffic across it, and remove it.
# usage: scripts/demo.sh [VNET_BINARY]   (default bin/vnet; needs root)
set -euo pipefail
vnet=${1:-bin/vnet}
spec=examples/demo.yaml
if [ "$(id -u)" != 0 ]; then
  echo "the demo needs root (it creates network namespaces): sudo make demo" >&2
  exit 1
fi
state=$(mktemp -d)
trap '"$vnet" --state-dir "$state" destroy demo >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
v() { "$vnet" --state-dir "$state" "$@"; }

echo "== vnet apply $spec"
v apply "$spec"
echo; echo "== second apply: nothing to do"
v apply "$spec"
echo; echo "== vnet status"
v status demo
echo; echo "== vnet netperf: web1 (esx1) -> web2 (esx2) over 1 Gbit NICs and the physical switch"
# Inside a node, "vnet" is the vnet that runs vnet exec, installed or not.
# destroy ends the netserver with its namespace.
v exec web2 -- vnet netserver >/dev/null
v exec web1 -- vnet netperf -H 192.168.50.12 -l 3 -c -C
echo; echo "== vnet ioc stats: the pools on each host's dvs0 uplink (idle now)"
v ioc stats demo -i 500ms
echo; echo "== vnet destroy demo"
v destroy demo
trap 'rm -rf "$state"' EXIT
echo "no namespace left: $(ip netns list 2>/dev/null | grep -c '^vnet\.demo\.' || true) of demo's remain"
