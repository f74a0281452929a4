package service

import (
	"context"
	"fmt"

	"github.com/vnet-project/vnet/internal/spec"
	"github.com/vnet-project/vnet/internal/topology"
)

// Topology is the graph of an applied infrastructure: its spec as applied,
// with the state its status reads of each port and NIC (over etcd, what
// the spec places where, each host's standing aside).
func Topology(ctx context.Context, svc Service, name string) (*topology.Graph, error) {
	in, err := svc.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	doc, err := svc.Load(in.SpecFile, in.Spec)
	if err != nil {
		return nil, fmt.Errorf("%s: the applied spec: %w", name, err)
	}
	all, err := svc.Status(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	if len(all) == 0 || all[0].Infra == nil {
		return topology.Build(doc.Spec, nil), nil
	}
	return topology.Build(doc.Spec, all[0].Infra), nil
}

// SpecTopology is the graph of a spec that need not be applied: what it
// would make, without states.
func SpecTopology(s *spec.Spec) *topology.Graph { return topology.Build(s, nil) }
