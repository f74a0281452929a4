package etcdstore

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAssess(t *testing.T) {
	rep := func(host string, gen int, errs ...string) Report {
		return Report{Host: host, Generation: gen, Errors: errs}
	}
	removing := func(host string, gen int, errs ...string) Report {
		r := rep(host, gen, errs...)
		r.Removing = true
		return r
	}
	type want struct {
		host  string
		state HostState
	}
	tests := []struct {
		name     string
		applied  int
		expected []string
		reports  []Report
		want     []want
	}{
		{"all current", 3, []string{"hv1", "hv2"}, []Report{rep("hv2", 3), rep("hv1", 3)},
			[]want{{"hv1", HostCurrent}, {"hv2", HostCurrent}}},
		{"one lagging", 3, []string{"hv1", "hv2"}, []Report{rep("hv1", 3), rep("hv2", 2)},
			[]want{{"hv1", HostCurrent}, {"hv2", HostLagging}}},
		{"one gone", 3, []string{"hv1", "hv2"}, []Report{rep("hv1", 3)},
			[]want{{"hv1", HostCurrent}, {"hv2", HostGone}}},
		{"errors at applied generation fail", 3, []string{"hv1"}, []Report{rep("hv1", 3, "bridge: busy")},
			[]want{{"hv1", HostFailed}}},
		{"errors at an older generation still lag", 3, []string{"hv1"}, []Report{rep("hv1", 2, "bridge: busy")},
			[]want{{"hv1", HostLagging}}},
		{"a generation ahead of the record lags too", 1, []string{"hv1"}, []Report{rep("hv1", 4)},
			[]want{{"hv1", HostLagging}}},
		{"unnamed reporters come last, by name", 2, []string{"hv2"}, []Report{rep("zz", 2), rep("hv2", 2), rep("aa", 1)},
			[]want{{"hv2", HostCurrent}, {"aa", HostUnexpected}, {"zz", HostUnexpected}}},
		{"no reports: every host gone", 1, []string{"hv1", "hv2"}, nil,
			[]want{{"hv1", HostGone}, {"hv2", HostGone}}},
		{"a host named twice counts once", 1, []string{"hv1", "hv1"}, []Report{rep("hv1", 1)},
			[]want{{"hv1", HostCurrent}}},
		{"nothing expected, nothing reported", 1, nil, nil, []want{}},
		{"a failed removal by a host left out of the spec fails", 2, []string{"hv1"}, []Report{rep("hv1", 2), removing("hv3", 1, "bridge: busy")},
			[]want{{"hv1", HostCurrent}, {"hv3", HostFailed}}},
		{"record gone: a failed removal fails, a host not there yet is unexpected", 0, nil,
			[]Report{rep("hv2", 4), removing("hv1", 4, "bridge: busy")},
			[]want{{"hv1", HostFailed}, {"hv2", HostUnexpected}}},
		{"a named host failing to remove its part fails, whatever generation it names", 3, []string{"hv1"},
			[]Report{removing("hv1", 0, "veth: busy")}, []want{{"hv1", HostFailed}}},
		{"a removal without errors is no state of the applied generation", 3, []string{"hv1", "hv2"},
			[]Report{removing("hv1", 3), removing("hv2", 3)}, []want{{"hv1", HostLagging}, {"hv2", HostLagging}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			views := Assess(tt.applied, tt.expected, tt.reports)
			got := []want{}
			for _, v := range views {
				got = append(got, want{v.Host, v.State})
				if (v.State == HostGone) != (v.Report == nil) {
					t.Errorf("%s: state %s with report %v", v.Host, v.State, v.Report)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Assess = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConverged(t *testing.T) {
	if !Converged(nil) {
		t.Error("no hosts: converged")
	}
	if !Converged([]HostView{{State: HostCurrent}, {State: HostCurrent}}) {
		t.Error("all current: converged")
	}
	for _, s := range []HostState{HostLagging, HostFailed, HostGone, HostUnexpected} {
		if Converged([]HostView{{State: HostCurrent}, {State: s}}) {
			t.Errorf("one %s: not converged", s)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	tests := map[string][]string{
		"":                            nil,
		" , ":                         nil,
		"127.0.0.1:2379":              {"127.0.0.1:2379"},
		"http://a:1, http://b:2,,c:3": {"http://a:1", "http://b:2", "c:3"},
	}
	for in, want := range tests {
		if got := ParseEndpoints(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseEndpoints(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRanOutOfTime(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the context's error", context.DeadlineExceeded, true},
		{"wrapped", fmt.Errorf("get: %w", context.DeadlineExceeded), true},
		{"status DeadlineExceeded", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), true},
		{"status Unknown with the context's error", status.Error(codes.Unknown, "context deadline exceeded"), true},
		{"status Unknown, another cause", status.Error(codes.Unknown, "etcdserver: request is too large"), false},
		{"status Unavailable", status.Error(codes.Unavailable, "connection refused"), false},
		{"canceled", context.Canceled, false},
	} {
		if got := ranOutOfTime(tc.err); got != tc.want {
			t.Errorf("%s: ranOutOfTime(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
