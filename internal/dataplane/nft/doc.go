// Package nft is the dataplane's firewall: the tables, base chains and
// port maps of a host namespace's firewall (plan.KindFirewall) and each
// port's policy (plan.KindPortSec), compiled from plan.PortPolicy into
// nftables rules, made in one transaction per change, and read back as
// the resources observation reports, with the rules' counters.
//
// It speaks nftables through google/nftables, and through raw netfilter
// messages (mdlayher/netlink) where reading whole rules would decode far
// more than vnet needs (notes.go). Each exported call's comment names the
// nft(8) command it is equivalent to; nothing here runs nft.
//
// A Firewalls keeps, for the life of a command or an agent, an nftables
// socket per namespace it changed and what the last observation read of
// each table's port maps, so that a change to one port among thousands
// need not read the maps again (jumps.go).
package nft
