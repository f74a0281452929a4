package units

import (
	"testing"
	"time"
)

func TestParsePercent(t *testing.T) {
	tests := []struct {
		in      string
		want    Percent
		wantErr bool
	}{
		{"75%", 0.75, false},
		{"75", 0.75, false},
		{"12.5%", 0.125, false},
		{"100%", 1, false},
		{"0%", 0, true},
		{"101%", 0, true},
		{"-5%", 0, true},
		{"high", 0, true},
		{"", 0, true},
		{"nan", 0, true},
		{"NaN%", 0, true},
		{"inf%", 0, true},
	}
	for _, tt := range tests {
		got, err := ParsePercent(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in      string
		want    Duration
		wantErr bool
	}{
		{"30s", Duration(30 * time.Second), false},
		{"500ms", Duration(500 * time.Millisecond), false},
		{"2m", Duration(2 * time.Minute), false},
		{"30", 0, true}, // no unit: seconds or milliseconds?
		{"0s", 0, true},
		{"-1s", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, err=%v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
