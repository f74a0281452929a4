package hostagent

import "github.com/vnet-project/vnet/internal/plan"

// realizedPause keeps what an apply of infra left paused on the host, which
// its reports say, so that a pause or resume waited for over etcd is seen
// to be done.
func (a *Agent) realizedPause(infra string, p plan.Paused) {
	if a.paused == nil {
		a.paused = map[string]plan.Paused{}
	}
	if len(p) == 0 {
		delete(a.paused, infra)
		return
	}
	a.paused[infra] = p
}
