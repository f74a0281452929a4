package plan

import "testing"

// What an apply of one VM more at 1,000 VMs keeps of the whole model for
// its scope: go test -run XXX -bench ScopeDesired ./internal/plan
func BenchmarkScopeDesired1000(b *testing.B) {
	last, next := portGroupScaleSpec(b, 1000, false), portGroupScaleSpec(b, 1000, true)
	opt := Options{PortPrograms: true}
	lm, nm := Model(last, opt), Model(next, opt)
	scope := ModelScope(lm, nm)
	for b.Loop() {
		scope.Desired(nm)
	}
}
