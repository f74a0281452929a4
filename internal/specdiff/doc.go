// Package specdiff compares two specs object by object and field by field:
// which hosts, NICs, host ports, switches, uplinks, pools, port groups,
// classify and ACL rules, networks, routers, VMs and vNICs one adds,
// removes or changes against the other. It is what `vnet diff` prints,
// what a history entry's one-line summary is made of, and what decides the
// exit code of a diff (0 when Equal, 1 otherwise).
//
// The comparison is of what the specs say, not of what the kernel holds
// (that is plan.Diff's) and not of what vnet's defaults make of them: an
// MTU left out and an MTU of 1500 differ here, as they differ to whoever
// reads the two files. So a file is to be compared with a stored spec as
// it would be stored: with its networks' VNIs pinned against the stored
// spec first (store.PinVNIs), or every network that leaves its VNI out
// would show it going away.
//
// Objects are matched by what names them: hosts, switches, port groups,
// networks, routers and VMs by name (a port group's name is unique in the
// whole spec, so one that moves to another switch is changed, not removed
// and added); NICs by host and name; host ports by host and interface name
// (vmkN when left out); uplinks and pools by switch and name; vNICs by VM
// and position (eth0, eth1, ...), which is what names them inside the VM.
// Rules have no names: the lists of two specs are aligned on the rules they
// share (a longest common subsequence), so inserting one rule at the top
// shows one rule added rather than every rule changed.
//
// Fields are read by reflection over the spec's types, named by their YAML
// keys (shaping.egress.average, security.macChanges), so a field added to
// the spec is compared without a change here; a test fails for any field
// whose change Compare would not report. Rates, sizes, percentages and
// durations print as units prints them (100Mbit, 64KiB, 75%, 30s).
package specdiff
