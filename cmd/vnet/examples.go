package main

import (
	"strings"

	"github.com/spf13/cobra"
)

// helpExamples are what each command's --help ends with, by the command's
// path under vnet. They are kept together so that a test can tell that no
// command lacks them; a command that sets its own (pause, resume) keeps
// them.
var helpExamples = map[string]string{
	"validate": `  vnet validate examples/demo.yaml
  sed 's/mtu: 1500/mtu: 9000/' demo.yaml | vnet validate -   # - reads standard input`,
	"apply": `  vnet apply examples/demo.yaml
  vnet apply --dry-run demo.yaml          # the plan alone
  vnet apply --full demo.yaml             # read everything and repair drift
  generate-spec | vnet apply -            # the spec on standard input
  vnet apply --etcd http://10.0.0.1:2379 --wait tenants.yaml`,
	"destroy": `  vnet destroy demo
  vnet destroy examples/demo.yaml        # the infrastructure the file names
  vnet destroy tenants --etcd http://10.0.0.1:2379 --wait`,
	"status": `  vnet status                   # every infrastructure
  vnet status demo -o yaml
  vnet status -o json | jq '.[].vms[].name'`,
	"exec": `  vnet exec web1 -- ip -br addr
  vnet exec demo/web1 -- ping -c 3 10.0.0.2   # when several infrastructures have a web1
  vnet exec esx1 -- bridge link`,
	"link": `  vnet link web1 eth1 pg-backup
  vnet link --infra demo web1 eth0 pg-vm
  vnet link web1 eth1 pg-backup --etcd http://10.0.0.1:2379 --wait   # a new generation; wait for the hosts
  vnet link web1 eth1 pg-backup --server http://127.0.0.1:8470`,
	"unlink": `  vnet unlink web1 eth1
  vnet unlink --infra demo web1 eth0
  vnet unlink web1 eth1 --etcd http://10.0.0.1:2379`,
	"agent": `  vnet agent run demo
  vnet agent stop demo
  vnet agent host --etcd http://10.0.0.1:2379 --metrics-addr 127.0.0.1:9471`,
	"agent run": `  vnet agent run demo
  vnet agent run demo --tick 200ms`,
	"agent stop": `  vnet agent stop demo`,
	"agent host": `  vnet agent host --etcd http://10.0.0.1:2379
  vnet agent host --etcd https://10.0.0.1:2379 --etcd-ca ca.pem --host hv1 --metrics-addr 127.0.0.1:9471`,
	"gc": `  vnet gc --dry-run   # what would go
  vnet gc`,
	"netperf": `  vnet netperf -H 10.0.0.2 -l 5
  vnet netperf -H 10.0.0.2 -t TCP_RR -- -r 64,64
  vnet exec web1 -- vnet netperf -H 10.0.0.2 -t UDP_STREAM -- -m 1400`,
	"netserver": `  vnet netserver              # in the background, on port 12865
  vnet netserver -D -p 12866  # in the foreground
  vnet exec web2 -- vnet netserver`,
	"ioc": `  vnet ioc stats demo
  vnet ioc stats demo --watch -i 2s -o json`,
	"ioc stats": `  vnet ioc stats demo
  vnet ioc stats demo --watch -i 2s
  vnet ioc stats demo -o yaml`,
	"lab": `  vnet lab list
  vnet lab run --quick s4-scenario1
  vnet lab report lab-out`,
	"lab list":    `  vnet lab list`,
	"lab machine": `  vnet lab machine`,
	"lab run": `  vnet lab run s4-scenario1
  vnet lab run --all --quick --out /tmp/lab
  vnet lab run --repeat 3 s2-scale-out`,
	"lab report": `  vnet lab report lab-out`,
	"recover": `  vnet recover
  vnet recover --adopt demo   # namespaces an older vnet made
  vnet recover --rebuild`,
	"server": `  vnet server                                   # API, metrics and dashboard on 127.0.0.1:8470, etcd on 127.0.0.1:2379
  vnet server --no-etcd --listen 0.0.0.0:8470 --tls-cert cert.pem --tls-key key.pem
  vnet server --etcd http://10.0.0.1:2379 --no-etcd`,
	"stats": `  vnet stats demo
  vnet stats demo --server http://127.0.0.1:8470 --window 10m -o json`,
	"version": `  vnet version
  vnet --version`,
}

// addExamples gives each command under c its examples.
func addExamples(c *cobra.Command, rootName string) {
	for _, sub := range c.Commands() {
		if sub.Example == "" {
			sub.Example = helpExamples[strings.TrimPrefix(sub.CommandPath(), rootName+" ")]
		}
		addExamples(sub, rootName)
	}
}
