package plan

import (
	"fmt"
	"os"

	"github.com/vnet-project/vnet/internal/units"
)

// WireCeilingEnv names the environment variable that caps every emulated
// wire's shaper, e.g. VNET_WIRE_CEILING=300Mbit. It makes a fast machine
// behave like one whose qdisc timers cannot keep up with the spec's line
// rates, so that what depends on that can be tested anywhere. The spec's
// speeds stay what status and the lab report as nominal.
const WireCeilingEnv = "VNET_WIRE_CEILING"

// WireCeiling reads WireCeilingEnv: 0 when it is unset or empty.
func WireCeiling() (uint64, error) {
	v := os.Getenv(WireCeilingEnv)
	if v == "" {
		return 0, nil
	}
	r, err := units.ParseRate(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", WireCeilingEnv, err)
	}
	if r == 0 {
		return 0, fmt.Errorf("%s: a ceiling of 0 would stop every wire", WireCeilingEnv)
	}
	return uint64(r), nil
}

// wireRate is the rate an emulated wire of nominal speed is shaped to:
// the speed, or the ceiling where one is set and lower. A ceiling that
// does not parse is ignored here; `vnet lab` refuses it with its reason.
func wireRate(speed units.Rate) uint64 {
	c, err := WireCeiling()
	if err != nil || c == 0 {
		return uint64(speed)
	}
	return min(uint64(speed), c)
}
