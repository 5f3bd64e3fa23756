package problems

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
)

// Directives are the #!POPCORN lines of a submission (//!POPCORN in C++ and
// CUDA files), which name its leaderboard and GPUs when the command line
// does not.
type Directives struct {
	Leaderboard string
	GPUs        []string
}

// ParseDirectives reads every "#!POPCORN key value" line. Known keys are
// leaderboard (one name) and gpu or gpus (names separated by spaces or
// commas); anything else, a missing value or two different leaderboards is
// an error naming the line, so a typo never sends a file to the wrong place.
func ParseDirectives(src []byte) (Directives, error) {
	var d Directives
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64<<10), len(src)+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		var rest string
		switch {
		case strings.HasPrefix(line, "#!POPCORN"):
			rest = line[len("#!POPCORN"):]
		case strings.HasPrefix(line, "//!POPCORN"):
			rest = line[len("//!POPCORN"):]
		default:
			continue
		}
		if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			return Directives{}, fmt.Errorf("line %d: %q: want #!POPCORN KEY VALUE", n, line)
		}
		fields := strings.Fields(strings.ReplaceAll(rest, ",", " "))
		if len(fields) < 2 {
			return Directives{}, fmt.Errorf("line %d: %q: want #!POPCORN KEY VALUE (leaderboard NAME or gpu NAME)", n, line)
		}
		switch key := strings.ToLower(fields[0]); key {
		case "leaderboard":
			if len(fields) != 2 {
				return Directives{}, fmt.Errorf("line %d: #!POPCORN leaderboard takes one name, got %d", n, len(fields)-1)
			}
			if d.Leaderboard != "" && d.Leaderboard != fields[1] {
				return Directives{}, fmt.Errorf("line %d: a second #!POPCORN leaderboard (%s, after %s)", n, fields[1], d.Leaderboard)
			}
			d.Leaderboard = fields[1]
		case "gpu", "gpus":
			d.GPUs = append(d.GPUs, fields[1:]...)
		default:
			return Directives{}, fmt.Errorf("line %d: unknown #!POPCORN key %q (want leaderboard or gpu)", n, fields[0])
		}
	}
	if err := sc.Err(); err != nil {
		return Directives{}, fmt.Errorf("read directives: %w", err)
	}
	return d, nil
}
