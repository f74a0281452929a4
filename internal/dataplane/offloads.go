package dataplane

import (
	"fmt"

	"github.com/safchain/ethtool"

	"github.com/vnet-project/vnet/internal/plan"
)

// ethtool's feature names behind "gro" and "tso" (ethtool -K LINK tso on
// turns on all of the TCP segmentation features).
var (
	groFeatures = []string{"rx-gro"}
	tsoFeatures = []string{"tx-tcp-segmentation", "tx-tcp-ecn-segmentation", "tx-tcp-mangleid-segmentation", "tx-tcp6-segmentation", "tx-tcp-accecn-segmentation"}
)

// setOffloads turns a link's receive and segmentation offloads on or off.
// Equivalent to: ip netns exec NS ethtool -K LINK gro on|off tso on|off
func setOffloads(r plan.Resource) error {
	change := map[string]bool{}
	for _, f := range []struct {
		state plan.Tri
		names []string
	}{{r.GRO, groFeatures}, {r.TSO, tsoFeatures}} {
		if f.state == plan.Unset {
			continue
		}
		for _, n := range f.names {
			change[n] = f.state == plan.On
		}
	}
	if len(change) == 0 {
		return nil
	}
	return inNS(r.NS, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return fmt.Errorf("ethtool: %w", err)
		}
		defer e.Close()
		known, err := e.Features(r.Link)
		if err != nil {
			return fmt.Errorf("ethtool -k %s: %w", r.Link, err)
		}
		for n := range change {
			if _, ok := known[n]; !ok {
				delete(change, n) // older kernels lack some TSO variants
			}
		}
		if err := e.Change(r.Link, change); err != nil {
			return fmt.Errorf("ethtool -K %s: %w", r.Link, err)
		}
		return nil
	})
}

// readOffloads reports the link's GRO and TSO as the kernel has them.
func readOffloads(ns, link string) (gro, tso plan.Tri, err error) {
	err = inNS(ns, func() error {
		e, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer e.Close()
		f, err := e.Features(link)
		if err != nil {
			return fmt.Errorf("ethtool -k %s: %w", link, err)
		}
		gro, tso = tri(f[groFeatures[0]]), tri(f[tsoFeatures[0]])
		return nil
	})
	return gro, tso, err
}

func tri(b bool) plan.Tri {
	if b {
		return plan.On
	}
	return plan.Off
}
