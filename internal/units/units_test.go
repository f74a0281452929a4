package units

import (
	"strings"
	"testing"
	"time"
)

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		wantErr bool
	}{
		{"1Gbit", 1e9, false},
		{"10Gbit", 10e9, false},
		{"1.5Gbit", 1.5e9, false},
		{"500Mbit", 500e6, false},
		{"500mbit", 500e6, false},
		{"640Kbit", 640e3, false},
		{"1000", 1000, false},
		{"3Gbit/s", 3e9, false},
		{"100Mbps", 0, true},
		{"1GB", 0, true},
		{"fast", 0, true},
		{"", 0, true},
		{"-1Gbit", 0, true},
		{"1.2.3Gbit", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr bool
	}{
		{"64KB", 64000, false},
		{"100KiB", 102400, false},
		{"1MiB", 1 << 20, false},
		{"1mib", 1 << 20, false},
		{"1500", 1500, false},
		{"2GiB", 2 << 30, false},
		{"8B", 8, false},
		{"1Mbit", 0, true},
		{"1XB", 0, true},
		{"KiB", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, s := range []string{"1Gbit", "1.5Gbit", "640Kbit", "10Gbit", "999bit"} {
		r, err := ParseRate(s)
		if err != nil || r.String() != s {
			t.Errorf("rate %q -> %v -> %q", s, r, r.String())
		}
	}
	for _, s := range []string{"64KiB", "1MiB", "1500B"} {
		v, err := ParseSize(s)
		if err != nil || v.String() != s {
			t.Errorf("size %q -> %v -> %q", s, v, v.String())
		}
	}
}

// A huge input is quoted clipped, with its length, not whole.
func TestErrorsClipTheInput(t *testing.T) {
	huge := strings.Repeat("9", 100_000)
	for _, f := range []func() error{
		func() error { _, err := ParseRate(huge + "Gbit"); return err },
		func() error { _, err := ParseRate("1" + huge); return err },
		func() error { _, err := ParseSize(huge + "KiB"); return err },
		func() error { _, err := ParsePercent(huge); return err },
		func() error { _, err := ParseDuration(huge); return err },
	} {
		err := f()
		if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "bytes)") {
			t.Errorf("error %.300q; want it clipped", err)
		}
	}
}

func TestRateBytes(t *testing.T) {
	if got := Rate(8_000_000).Bytes(4 * time.Second); got != 4_000_000 {
		t.Errorf("1 MB/s for 4 s = %v bytes", got)
	}
}
