// Package interop tests vnet netperf and vnet netserver against netperf
// 2.7.1 itself, built from its source in ../shared/peers, and against
// flent driving either: every test both ways over IPv4 and IPv6, the
// selectors netperf scripts read, and flent's data files. It holds tests
// only.
package interop
