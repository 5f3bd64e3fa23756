package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// procDevices reads the character majors of /proc/devices by driver name.
func procDevices(root string) (map[string]int64, error) {
	f, err := os.Open(filepath.Join(root, "proc/devices"))
	if err != nil {
		return nil, fmt.Errorf("read /proc/devices: %w", err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "Block devices") {
			break
		}
		num, name, ok := strings.Cut(line, " ")
		if n, err := strconv.ParseInt(num, 10, 64); ok && err == nil {
			out[strings.TrimSpace(name)] = n
		}
	}
	return out, sc.Err()
}

// charNode describes the character device at path under root: from the
// node itself where it exists, else from the major /proc/devices gave and
// the minor the driver's convention fixes. A missing node with no known
// major is an error.
func charNode(root, path string, major, minor int64) (Node, error) {
	var st unix.Stat_t
	err := unix.Stat(filepath.Join(root, path), &st)
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR:
		return Node{Path: path, Type: 'c', Major: int64(unix.Major(st.Rdev)), Minor: int64(unix.Minor(st.Rdev))}, nil
	case err == nil:
		// A test tree holds plain files: their numbers come from the name's
		// driver in /proc/devices.
		if major > 0 {
			return Node{Path: path, Type: 'c', Major: major, Minor: minor}, nil
		}
		return Node{}, fmt.Errorf("%s is not a character device", path)
	case errors.Is(err, fs.ErrNotExist) && major > 0:
		return Node{Path: path, Type: 'c', Major: major, Minor: minor}, nil
	}
	return Node{}, fmt.Errorf("device node %s: %w", path, err)
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// nodeCPUs is the cpulist of a NUMA node, "" when unknown.
func nodeCPUs(root string, node int) string {
	if node < 0 {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(root, fmt.Sprintf("sys/devices/system/node/node%d/cpulist", node)))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ParseCPUList reads a kernel cpulist ("0-7,16-23") into CPU ids.
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpulist %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpulist %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b && c < 1<<16; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}
