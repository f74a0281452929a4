package spec

// index finds hosts, NICs, port groups and the hosts of switches by name in
// constant time, so that validating a spec costs about its size: Spec's
// own lookups are linear, which makes a spec of thousands of objects take
// seconds, and a hostile one minutes. Where names repeat, the first wins,
// as with Spec's lookups (the repeat is an error of its own).
type index struct {
	hosts    map[string]*Host
	nics     map[*Host]map[string]*NIC
	pgSwitch map[string]*Switch
	swHosts  map[*Switch][]string
	swOn     map[*Switch]map[string]bool
	uplinks  map[*Switch]map[string]bool
	networks map[string]*Network
	spaces   map[*Network]string // every network's AddressSpace, made once
}

func newIndex(s *Spec) *index {
	x := &index{
		hosts:    map[string]*Host{},
		nics:     map[*Host]map[string]*NIC{},
		pgSwitch: map[string]*Switch{},
		swHosts:  map[*Switch][]string{},
		swOn:     map[*Switch]map[string]bool{},
		uplinks:  map[*Switch]map[string]bool{},
		networks: make(map[string]*Network, len(s.Networks)),
		spaces:   make(map[*Network]string, len(s.Networks)),
	}
	for i := range s.Networks {
		x.spaces[&s.Networks[i]] = s.Networks[i].AddressSpace()
		if _, dup := x.networks[s.Networks[i].Name]; !dup {
			x.networks[s.Networks[i].Name] = &s.Networks[i]
		}
	}
	for i := range s.Hosts {
		h := &s.Hosts[i]
		if _, dup := x.hosts[h.Name]; !dup {
			x.hosts[h.Name] = h
		}
		nics := map[string]*NIC{}
		for j := range h.NICs {
			if _, dup := nics[h.NICs[j].Name]; !dup {
				nics[h.NICs[j].Name] = &h.NICs[j]
			}
		}
		x.nics[h] = nics
	}
	for i := range s.Switches {
		sw := &s.Switches[i]
		for _, pg := range sw.PortGroups {
			if _, dup := x.pgSwitch[pg.Name]; !dup {
				x.pgSwitch[pg.Name] = sw
			}
		}
		hosts := sw.SwitchHosts()
		on := make(map[string]bool, len(hosts))
		for _, h := range hosts {
			on[h] = true
		}
		x.swHosts[sw], x.swOn[sw] = hosts, on
		ups := map[string]bool{}
		for _, u := range sw.Uplinks {
			ups[u.Name] = true
		}
		x.uplinks[sw] = ups
	}
	return x
}

func (x *index) host(name string) (*Host, bool) {
	h, ok := x.hosts[name]
	return h, ok
}

func (x *index) nic(h *Host, name string) (*NIC, bool) {
	n, ok := x.nics[h][name]
	return n, ok
}

// hostPortNames is Spec.HostPortName of every host port, in one pass.
func hostPortNames(s *Spec) []string {
	out := make([]string, len(s.HostPorts))
	next := map[string]int{}
	for i, hp := range s.HostPorts {
		if hp.Name != "" {
			out[i] = hp.Name
			continue
		}
		out[i] = defaultHostPortName(next[hp.Host])
		next[hp.Host]++
	}
	return out
}
