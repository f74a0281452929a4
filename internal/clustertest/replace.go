package clustertest

import (
	"path/filepath"
	"strconv"
)

// etcdDir is the data directory of the cluster's etcd.
func (c *Cluster) etcdDir() string {
	if c.etcds == 0 {
		return filepath.Join(c.dir, "etcd")
	}
	return filepath.Join(c.dir, "etcd"+strconv.Itoa(c.etcds))
}

// ReplaceEtcd stops vnet server and starts it at the same address on an
// empty data directory: another etcd, holding nothing of the one before,
// as when an infrastructure moves to another cluster. Agents started
// before keep watching the etcd that is gone: restart them.
func (c *Cluster) ReplaceEtcd() {
	c.t.Helper()
	c.StopServer()
	c.etcds++
	c.startServer()
}
