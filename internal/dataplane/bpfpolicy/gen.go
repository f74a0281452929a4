// Package bpfpolicy holds the BPF programs that enforce a switch port's
// security policy and ACL (src/policy.c), built with clang by bpf2go into
// policy_bpfel.o and its Go bindings, which are committed so that building
// vnet needs no clang, and what loads them for one port's policy.
package bpfpolicy

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target bpfel,bpfeb -type rule -type port -type fdb_key -type fdb_port -type gen_key -type count_key -type kernel_settings -type conn -type frag policy src/policy.c
