package config

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a size as Docker takes it: a whole number of bytes with
// an optional unit k, m or g (powers of 1024), such as 512m or 2g.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'm', 'M':
			mult = 1 << 20
		case 'g', 'G':
			mult = 1 << 30
		case 'b', 'B':
		}
		if mult > 1 || t[len(t)-1] == 'b' || t[len(t)-1] == 'B' {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size such as 512m or 2g", s)
	}
	return n * mult, nil
}
