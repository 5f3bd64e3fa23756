package policies

import (
	"strings"
	"testing"
)

func TestParseByteSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ByteSize
		err  bool
	}{
		{"512", 512, false},
		{"64K", 64 << 10, false},
		{"256M", 256 << 20, false},
		{"8G", 8 << 30, false},
		{"8GiB", 8 << 30, false},
		{" 1.5g ", 3 << 29, false},
		{"2T", 2 << 40, false},
		{"", 0, true},
		{"-1M", 0, true},
		{"lots", 0, true},
		{"9999999T", 0, true},
		{"nan", 0, true},
		{"NaNM", 0, true},
		{"inf", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseByteSize(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err != nil && !strings.Contains(err.Error(), "512M or 8G") {
			t.Errorf("ParseByteSize(%q) error %q does not say what a size looks like", tt.in, err)
		}
	}
}

// TestByteSize_RoundTrip: what String writes, ParseByteSize reads back.
func TestByteSize_RoundTrip(t *testing.T) {
	t.Parallel()
	for _, b := range []ByteSize{0, 1, 1023, 4 << 10, 16 << 20, 3 << 30, 1 << 40} {
		var got ByteSize
		if err := got.UnmarshalText([]byte(b.String())); err != nil || got != b {
			t.Errorf("UnmarshalText(%q) = %d, %v; want %d", b.String(), got, err, b)
		}
	}
	var empty ByteSize = 7
	if err := empty.UnmarshalText([]byte("")); err != nil || empty != 0 {
		t.Errorf(`UnmarshalText("") = %d, %v; want 0 (none), as configs wrote it`, empty, err)
	}
	if got := ByteSize(1536 << 20).String(); got != "1536M" {
		t.Errorf("ByteSize(1536M).String() = %q, want 1536M", got)
	}
	if got := ByteSize(1536<<20 + 1).String(); got != "1.5G" {
		t.Errorf("ByteSize(1536M + 1).String() = %q, want 1.5G", got)
	}
}
