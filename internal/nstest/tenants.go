package nstest

// TwoTenants is the networks and VMs of two tenants with the same subnet,
// addresses and MACs over three hosts hv1, hv2 and hv3, which the spec
// gives around it. Tenant a has two networks on one router (web over the
// three hosts; db on hv3); tenant b one network over the three hosts, each
// VM the twin of one of a's web VMs.
const TwoTenants = `networks:
  - {name: a-web, subnet: 10.1.0.0/24, gateway: 10.1.0.1, router: ta}
  - {name: a-db, subnet: 10.2.0.0/24, gateway: 10.2.0.1, router: ta}
  - {name: b-web, subnet: 10.1.0.0/24, gateway: 10.1.0.1, router: tb}
vms:
  - {name: a1, host: hv1, nics: [{network: a-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - {name: a2, host: hv2, nics: [{network: a-web, ip: 10.1.0.12/24, mac: "02:00:00:00:00:12"}]}
  - {name: a3, host: hv3, nics: [{network: a-web, ip: 10.1.0.13/24, mac: "02:00:00:00:00:13"}]}
  - {name: a4, host: hv3, nics: [{network: a-db, ip: 10.2.0.14/24, mac: "02:00:00:00:00:14"}]}
  - {name: b1, host: hv1, nics: [{network: b-web, ip: 10.1.0.11/24, mac: "02:00:00:00:00:11"}]}
  - {name: b2, host: hv2, nics: [{network: b-web, ip: 10.1.0.12/24, mac: "02:00:00:00:00:12"}]}
  - {name: b3, host: hv3, nics: [{network: b-web, ip: 10.1.0.13/24, mac: "02:00:00:00:00:13"}]}
`

// TenantIP is each VM of TwoTenants' address.
var TenantIP = map[string]string{
	"a1": "10.1.0.11", "a2": "10.1.0.12", "a3": "10.1.0.13", "a4": "10.2.0.14",
	"b1": "10.1.0.11", "b2": "10.1.0.12", "b3": "10.1.0.13",
}
