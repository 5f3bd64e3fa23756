package gpu

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// amdNames are the PCI device ids of the Instinct GPUs leaderboards name,
// for hosts whose sysfs has no product_name.
var amdNames = map[int64]string{
	0x738c: "AMD Instinct MI100",
	0x740c: "AMD Instinct MI250X",
	0x740f: "AMD Instinct MI210",
	0x74a0: "AMD Instinct MI300A",
	0x74a1: "AMD Instinct MI300X",
	0x74a5: "AMD Instinct MI325X",
}

// discoverAMD reads the KFD topology (/sys/class/kfd/kfd/topology/nodes),
// as AMD's own device plugin does: a node with a render minor above zero
// is a GPU, and its properties give the PCI address, ids and memory.
func discoverAMD(opt Options) (Inventory, error) {
	if _, err := os.Stat(filepath.Join(opt.Root, "sys/module/amdgpu")); err != nil {
		return Inventory{}, errors.New("no amdgpu driver loaded (/sys/module/amdgpu is missing)")
	}
	topo := filepath.Join(opt.Root, "sys/class/kfd/kfd/topology/nodes")
	entries, err := os.ReadDir(topo)
	if err != nil {
		return Inventory{}, fmt.Errorf("amdgpu is loaded but the KFD topology is not readable: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return numeric(entries[i].Name()) < numeric(entries[j].Name()) })
	devices, err := procDevices(opt.Root)
	if err != nil {
		return Inventory{}, err
	}
	kfd, err := charNode(opt.Root, "/dev/kfd", devices["kfd"], 0)
	if err != nil {
		return Inventory{}, err
	}
	inv := Inventory{Vendor: VendorAMD, GPUs: []GPU{}}
	if v, err := os.ReadFile(filepath.Join(opt.Root, "sys/module/amdgpu/version")); err == nil {
		inv.Driver = strings.TrimSpace(string(v))
	}
	for _, e := range entries {
		props, err := keyValues(filepath.Join(topo, e.Name(), "properties"))
		if err != nil {
			return Inventory{}, fmt.Errorf("KFD node %s: %w", e.Name(), err)
		}
		render := props["drm_render_minor"]
		if render <= 0 {
			continue // a CPU node
		}
		pci := kfdPCI(props)
		g := GPU{Index: len(inv.GPUs), Vendor: VendorAMD, PCI: pci, NUMANode: pciNUMANode(opt.Root, pci)}
		if id := props["unique_id"]; id != 0 {
			g.UUID = fmt.Sprintf("GPU-%016x", uint64(id))
		} else {
			g.UUID = "AMD-" + pci
		}
		g.Name = productName(opt.Root, pci)
		if g.Name == "" {
			g.Name = amdNames[props["device_id"]]
		}
		if g.Name == "" {
			g.Name = fmt.Sprintf("AMD GPU %#x (gfx %d)", props["device_id"], props["gfx_target_version"])
		}
		g.Type = TypeOf(g.Name, opt.Aliases)
		if mem, err := keyValues(filepath.Join(topo, e.Name(), "mem_banks/0/properties")); err == nil {
			g.Memory = uint64(mem["size_in_bytes"])
		}
		g.CPUs = nodeCPUs(opt.Root, g.NUMANode)
		rd, err := charNode(opt.Root, fmt.Sprintf("/dev/dri/renderD%d", render), devices["drm"], render)
		if err != nil {
			return Inventory{}, fmt.Errorf("GPU %s: %w", pci, err)
		}
		g.Nodes = []Node{kfd, rd}
		g.VisibleEnv = []string{"ROCR_VISIBLE_DEVICES=" + g.UUID}
		inv.GPUs = append(inv.GPUs, g)
	}
	return inv, nil
}

// kfdPCI is a KFD node's PCI address, from its domain and location_id
// (bus << 8 | device << 3 | function).
func kfdPCI(props map[string]int64) string {
	loc, domain := props["location_id"], props["domain"]
	return fmt.Sprintf("%04x:%02x:%02x.%x", domain, (loc>>8)&0xff, (loc>>3)&0x1f, loc&0x7)
}

func numeric(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 1 << 30
	}
	return n
}

// keyValues reads a KFD properties file: "name value" lines of integers.
func keyValues(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		} else if u, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = int64(u) // unique_id fills all 64 bits
		}
	}
	return out, sc.Err()
}

func productName(root, pci string) string {
	b, err := os.ReadFile(filepath.Join(root, "sys/bus/pci/devices", pci, "product_name"))
	if errors.Is(err, fs.ErrNotExist) || err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
