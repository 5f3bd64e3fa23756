package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ProfilingRestricted reads whether the NVIDIA driver keeps performance
// counters to administrators (RmProfilingAdminOnly: 1). Sandboxed runs are
// never administrators, so ncu would fail with ERR_NVGPUCTRPERM. root is
// "/" (or empty) or a test tree.
func ProfilingRestricted(root string) (bool, error) {
	f, err := os.Open(filepath.Join(hostRoot(root), "proc", "driver", "nvidia", "params"))
	if err != nil {
		return true, fmt.Errorf("read the NVIDIA driver's parameters: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "RmProfilingAdminOnly" {
			return strings.TrimSpace(v) != "0", nil
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	return true, errors.New("the NVIDIA driver's parameters do not say RmProfilingAdminOnly")
}

// ProfilingFix tells an operator how to open the counters.
const ProfilingFix = "set `options nvidia NVreg_RestrictProfilingToAdminUsers=0` in /etc/modprobe.d, " +
	"rebuild the initramfs and reboot (or reload the driver); check with `grep RmProfilingAdminOnly /proc/driver/nvidia/params`"

// NCU is an Nsight Compute installation.
type NCU struct {
	Path string // the ncu program
	// Dir is the directory a sandbox must bind for Path to run: ncu is a
	// script that starts the binaries beside it.
	Dir string
}

// FindNCU finds Nsight Compute: the configured path, else the newest
// installation under /opt/nvidia/nsight-compute or the CUDA toolkit, else
// ncu on PATH. Links are resolved, so Dir is where the files really are.
func FindNCU(configured string) (NCU, error) {
	var candidates []string
	if configured != "" {
		candidates = []string{configured}
	} else {
		for _, pat := range []string{"/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/nsight-compute*/ncu"} {
			m, _ := filepath.Glob(pat)
			slices.SortFunc(m, func(a, b string) int { return -compareVersions(a, b) })
			candidates = append(candidates, m...)
		}
		if p, err := exec.LookPath("ncu"); err == nil {
			candidates = append(candidates, p)
		}
	}
	for _, c := range candidates {
		p, err := filepath.EvalSymlinks(c)
		if err != nil {
			continue
		}
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return NCU{Path: p, Dir: filepath.Dir(p)}, nil
		}
	}
	if configured != "" {
		return NCU{}, fmt.Errorf("ncu %s is not an executable file", configured)
	}
	return NCU{}, errors.New("no ncu under /opt/nvidia/nsight-compute, /usr/local/cuda or on PATH (install Nsight Compute, or set profiler.ncu)")
}

// compareVersions orders paths holding dotted versions (2025.3.1 after
// 2025.10.0 would be wrong as strings).
func compareVersions(a, b string) int {
	as, bs := strings.FieldsFunc(a, notDigit), strings.FieldsFunc(b, notDigit)
	for i := 0; i < len(as) && i < len(bs); i++ {
		if len(as[i]) != len(bs[i]) {
			return len(as[i]) - len(bs[i])
		}
		if c := strings.Compare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

func notDigit(r rune) bool { return r < '0' || r > '9' }
