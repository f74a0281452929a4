// Package plan turns a spec into the kernel objects that realize it, and
// compares them with what exists to decide what to do.
//
// The model is flat on purpose: a Resource is a value (comparable with ==
// once its Owner label is cleared), keyed by where it lives (namespace and
// name). Desired resources come from Model; observed ones come from the
// dataplane, which reads the kernel. Diff orders the actions so that parents
// exist before children are made and children go before parents are removed.
//
// Rollback needs no inverse operations: the dataplane observes the host
// before an apply, and if any step fails the same Diff, run from what exists
// now back to that snapshot, converges the host to where it was.
//
// Everything vnet creates lives in namespaces named vnet.<infra>.<node>, so
// an infrastructure owns exactly its namespaces; inside them vnet's links
// carry an alias starting with "vnet:" so that links a user adds by hand are
// never touched.
package plan
