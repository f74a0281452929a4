package spec

import (
	"fmt"
	"time"

	"github.com/vnet-project/vnet/internal/teaming"
	"github.com/vnet-project/vnet/internal/units"
)

// Teaming is how a port group's traffic uses the switch's uplinks. On a
// switch it is the default; a port group overrides field by field.
type Teaming struct {
	Policy   string   `yaml:"policy"`  // loadbased, portid (default), srcmac, iphash, failover
	Active   []string `yaml:"active"`  // uplink names, in order; default all of the switch's
	Standby  []string `yaml:"standby"` // used in order when no active uplink is up
	LBT      *LBT     `yaml:"lbt"`
	Notify   *bool    `yaml:"notify"`   // announce moved MACs to the physical switch (default true)
	Failback *bool    `yaml:"failback"` // return to the preferred uplink when it is back (default true)
}

// LBT is load-based teaming's trigger.
type LBT struct {
	Threshold units.Percent  `yaml:"threshold"` // default 75%
	Window    units.Duration `yaml:"window"`    // default 30s
	Interval  units.Duration `yaml:"interval"`  // default 30s
}

// Team is a port group's teaming with the switch's defaults and vnet's
// applied: what the planner and the agent act on.
type Team struct {
	teaming.Team
	Notify bool
}

// EffectiveTeam resolves a port group's teaming.
func (sw *Switch) EffectiveTeam(pg *PortGroup) Team {
	var layers []*Teaming
	if sw.Teaming != nil {
		layers = append(layers, sw.Teaming)
	}
	if pg != nil && pg.Teaming != nil {
		layers = append(layers, pg.Teaming)
	}
	t := Team{Team: teaming.Team{Policy: teaming.PortID, Failback: true, LBT: teaming.DefaultLBT}, Notify: true}
	for _, u := range sw.Uplinks {
		t.Active = append(t.Active, u.Name)
	}
	for _, l := range layers {
		if l.Policy != "" {
			t.Policy, _ = teaming.ParsePolicy(l.Policy) // validated
		}
		if l.Active != nil {
			t.Active = l.Active
		}
		if l.Standby != nil {
			t.Standby = l.Standby
		}
		if l.Notify != nil {
			t.Notify = *l.Notify
		}
		if l.Failback != nil {
			t.Failback = *l.Failback
		}
		if l.LBT != nil {
			if l.LBT.Threshold != 0 {
				t.LBT.Threshold = float64(l.LBT.Threshold)
			}
			if l.LBT.Window != 0 {
				t.LBT.Window = time.Duration(l.LBT.Window)
			}
			if l.LBT.Interval != 0 {
				t.LBT.Interval = time.Duration(l.LBT.Interval)
			}
		}
	}
	if l := len(layers); l > 0 && layers[l-1].Active == nil && layers[l-1].Standby != nil {
		// Standbys named without actives: the rest of the uplinks are active.
		t.Active = without(t.Active, t.Standby)
	}
	return t
}

// TeamUplinks is every uplink some port group of the switch may use: the
// ones the host attaches to the switch.
func (sw *Switch) TeamUplinks() map[string]bool {
	used := map[string]bool{}
	add := func(t Team) {
		for _, u := range append(append([]string{}, t.Active...), t.Standby...) {
			used[u] = true
		}
	}
	if len(sw.PortGroups) == 0 {
		add(sw.EffectiveTeam(nil))
	}
	for i := range sw.PortGroups {
		add(sw.EffectiveTeam(&sw.PortGroups[i]))
	}
	return used
}

func without(list, drop []string) []string {
	dropped := make(map[string]bool, len(drop))
	for _, x := range drop {
		dropped[x] = true
	}
	var out []string
	for _, x := range list {
		if !dropped[x] {
			out = append(out, x)
		}
	}
	return out
}

// checkTeaming validates a teaming block at path against the switch's uplinks.
func (v *validator) checkTeaming(path string, t *Teaming, sw *Switch) {
	if t == nil {
		return
	}
	if _, err := teaming.ParsePolicy(t.Policy); err != nil {
		v.errf(path+".policy", "%v", err)
	}
	uplinks := v.x.uplinks[sw]
	seen := map[string]string{}
	for _, l := range []struct {
		name  string
		names []string
	}{{"active", t.Active}, {"standby", t.Standby}} {
		if l.names != nil && len(l.names) == 0 && l.name == "active" {
			v.errf(path+".active", "a team needs at least one active uplink")
		}
		for i, u := range l.names {
			p := fmt.Sprintf("%s.%s[%d]", path, l.name, i)
			switch {
			case !uplinks[u]:
				v.errf(p, "switch %q has no uplink %q%s", sw.Name, u, knownList(sw))
			case seen[u] != "":
				v.errf(p, "uplink %q is already listed at %s", u, seen[u])
			default:
				seen[u] = p
			}
		}
	}
	if t.LBT != nil && t.Policy != "" && t.Policy != string(teaming.LoadBased) {
		v.errf(path+".lbt", "lbt settings only apply to policy loadbased, not %s", t.Policy)
	}
}

func knownList(sw *Switch) string {
	if len(sw.Uplinks) == 0 {
		return " (it has no uplinks: a private segment cannot team)"
	}
	names := ""
	for i, u := range sw.Uplinks {
		if i > 0 {
			names += ", "
		}
		names += u.Name
	}
	return " (uplinks: " + names + ")"
}

// checkTeams validates the switch's default teaming and each port group's.
func (v *validator) checkTeams(i int, sw *Switch) {
	p := indexPath("switches", i)
	v.checkTeaming(p+".teaming", sw.Teaming, sw)
	for j := range sw.PortGroups {
		pp := fmt.Sprintf("%s.portgroups[%d].teaming", p, j)
		v.checkTeaming(pp, sw.PortGroups[j].Teaming, sw)
		if len(sw.Uplinks) > 0 && (sw.Teaming != nil || sw.PortGroups[j].Teaming != nil) {
			if t := sw.EffectiveTeam(&sw.PortGroups[j]); len(t.Active) == 0 {
				v.errf(pp, "no active uplink is left once the standbys are set aside")
			}
		}
	}
}
