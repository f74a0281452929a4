package plan

import (
	"reflect"
	"testing"
)

func TestNamespaceIDsVouch(t *testing.T) {
	const boot, mark = "b1", "vnet:demo:s1:/var/lib/vnet"
	noted := &NamespaceIDs{Boot: boot, Mark: mark, IDs: map[string]uint64{"a": 10, "b": 11, "c": 12, "z": 0}}
	names := []string{"a", "b", "c", "d", "z"}
	tests := []struct {
		name       string
		ids        *NamespaceIDs
		boot, want string
		now        map[string]uint64
		same       map[string]uint64
		unknown    []string
	}{
		{name: "no identities recorded", ids: nil, boot: boot, want: mark,
			now: map[string]uint64{"a": 10}, unknown: names},
		{name: "kernel tells no IDs", ids: noted, boot: "", want: mark, unknown: names},
		{name: "another boot", ids: noted, boot: "b2", want: mark,
			now: map[string]uint64{"a": 10, "b": 11, "c": 12}, unknown: names},
		{name: "noted with another mark (store moved)", ids: noted, boot: boot, want: "vnet:demo:s1:/elsewhere",
			now: map[string]uint64{"a": 10, "b": 11, "c": 12}, unknown: names},
		{name: "same, replaced, gone, never noted, zero", ids: noted, boot: boot, want: mark,
			now:     map[string]uint64{"a": 10, "b": 99, "d": 13, "z": 0},
			same:    map[string]uint64{"a": 10},
			unknown: []string{"b", "c", "d", "z"}},
		{name: "all the same", ids: noted, boot: boot, want: mark,
			now:  map[string]uint64{"a": 10, "b": 11, "c": 12},
			same: map[string]uint64{"a": 10, "b": 11, "c": 12}, unknown: []string{"d", "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			same, unknown := tt.ids.Vouch(tt.boot, tt.want, names, func([]string) map[string]uint64 { return tt.now })
			if len(same) != len(tt.same) || (len(same) > 0 && !reflect.DeepEqual(same, tt.same)) {
				t.Errorf("same = %v, want %v", same, tt.same)
			}
			if !reflect.DeepEqual(unknown, tt.unknown) {
				t.Errorf("unknown = %v, want %v", unknown, tt.unknown)
			}
		})
	}
}
