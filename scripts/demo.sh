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
# The demo's own name, so that it runs beside an infrastructure of the
# user's called demo: the spec, renamed, goes to vnet on standard input.
name=demo-$$
trap '"$vnet" --state-dir "$state" destroy "$name" >/dev/null 2>&1 || true; rm -rf "$state"' EXIT
v() { "$vnet" --state-dir "$state" "$@"; }
spec_as_name() { sed "s/^name: demo\$/name: $name/" "$spec"; }

echo "== vnet apply - (the spec of $spec, named $name)"
spec_as_name | v apply -
echo; echo "== second apply: nothing to do"
spec_as_name | v apply -
echo; echo "== vnet status"
v status "$name"
echo; echo "== vnet netperf: web1 (esx1) -> web2 (esx2) over 1 Gbit NICs and the physical switch"
# Inside a node, "vnet" is the vnet that runs vnet exec, installed or not.
# destroy ends the netserver with its namespace.
v exec web2 -- vnet netserver >/dev/null
v exec web1 -- vnet netperf -H 192.168.50.12 -l 3 -c -C
echo; echo "== vnet ioc stats: the pools on each host's dvs0 uplink (idle now)"
v ioc stats "$name" -i 500ms
echo; echo "== vnet destroy $name"
v destroy "$name"
trap 'rm -rf "$state"' EXIT
echo "no namespace left: $(ip netns list 2>/dev/null | grep -c "^vnet\.$name\." || true) of $name's remain"
