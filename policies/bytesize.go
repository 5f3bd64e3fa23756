package policies

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes written as people write limits: 512, 64K,
// 256M, 8G, 1T (powers of 1024; a trailing B or iB is allowed). It reads
// itself from text (config files, flags) once, so the rest of the code
// sees a number.
type ByteSize int64

// ParseByteSize reads a size like 512M or 8G.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*float64(mult) > float64(1<<62) {
		return 0, fmt.Errorf("%q is not a size like 512M or 8G", s)
	}
	return ByteSize(v * float64(mult)), nil
}

// String writes the size the way ParseByteSize reads it, exactly where a
// unit divides it and to one decimal otherwise.
func (b ByteSize) String() string {
	n := int64(b)
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

// UnmarshalText reads a size from a config file, where an empty value
// is 0 (the configs of before sizes were typed wrote "" for none).
func (b *ByteSize) UnmarshalText(text []byte) error {
	if strings.TrimSpace(string(text)) == "" {
		*b = 0
		return nil
	}
	v, err := ParseByteSize(string(text))
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// MarshalText writes a size the way a config file holds it.
func (b ByteSize) MarshalText() ([]byte, error) { return []byte(b.String()), nil }
