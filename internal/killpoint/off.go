//go:build !vnetkill

package killpoint

const enabled = false

func at(string) {}

func childEnv(env []string) []string { return env }
