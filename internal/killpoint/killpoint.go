// Package killpoint marks the moments at which a vnet command changes the
// host, so that tests can kill the process exactly there and prove that the
// next command repairs what it left. In a normal build At does nothing; a
// binary built with -tags vnetkill honors two variables:
//
//	VNET_KILL_AT=N       SIGKILL this process at its N-th point (from 1)
//	VNET_KILL_ON=TEXT    SIGKILL it at the first point whose name holds TEXT
//	VNET_KILL_TRACE=FILE append each point's number and name to FILE
//
// A child process (the agent vnet apply starts) does not inherit them; it
// gets VNET_KILL_AGENT_AT, VNET_KILL_AGENT_ON and VNET_KILL_AGENT_TRACE as
// its own VNET_KILL_AT, VNET_KILL_ON and VNET_KILL_TRACE instead.
package killpoint

// Enabled reports whether this binary honors the variables.
const Enabled = enabled

// At marks a point; name says what is about to happen or just happened.
func At(name string) { at(name) }

// ChildEnv returns env for a child vnet process started by this one.
func ChildEnv(env []string) []string { return childEnv(env) }
