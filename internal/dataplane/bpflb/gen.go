// Package bpflb holds the BPF programs that translate a client's
// connections to the load balancers of its network on its switch port
// (src/lb.c), built with clang by bpf2go into lb_bpfel.o and its Go
// bindings, which are committed so that building vnet needs no clang, and
// what loads them and fills their maps for one port.
package bpflb

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel,bpfeb -type svc_key -type svc -type vip_key -type vip -type backend -type ct_key -type ct_val -type rev_key -type rev_val -type aff_key -type aff_val -type conn_key lb src/lb.c
