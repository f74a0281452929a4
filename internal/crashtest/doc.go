// Package crashtest kills vnet apply, vnet destroy and the agent at their
// mutating steps and proves that the next command repairs what they left:
// the next apply converges (a further one changes nothing) and the next
// destroy leaves nothing of the infrastructure on the host. It drives a
// vnet binary built with -tags vnetkill (see package killpoint) as a
// subprocess, since a kill must take the whole process.
package crashtest
