package appliance

import (
	"bufio"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"kernelbox/appliance/api"
)

// GET /download/ hands out the files of the config's downloads directory:
// the client-only CLI that `make dist` builds for contestants' machines,
// which the package installs, so that a hackathon without internet gets
// its CLI from the box itself. No token: a contestant has none before the
// CLI. Only regular files directly in the directory are served, by name;
// nothing the name points at through a link or ".." leaves it.

var downloadsPage = template.Must(template.New("downloads").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kernelbox: downloads</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><h1>The kernelbox command line</h1>
<p>Pick your system's file, make it executable, and point it at this box:</p>
<pre>curl -fLo kernelbox {{.Base}}/download/kernelbox-linux-amd64
chmod +x kernelbox
./kernelbox register --server {{.Base}} --invite CODE --name YOU   # or: login, with a token an organiser gave you</pre>
<table><tr><th>file</th><th>bytes</th><th>SHA-256</th></tr>
{{range .Files}}<tr><td><a href="{{.Name}}">{{.Name}}</a></td><td>{{.Size}}</td><td><code>{{.Sum}}</code></td></tr>
{{else}}<tr><td colspan="3">none: this box has no client builds (make dist, then set downloads in the config)</td></tr>{{end}}
</table></body></html>
`))

type downloadFile struct {
	Name string
	Size int64
	Sum  string
}

func (a *API) download(w http.ResponseWriter, r *http.Request) error {
	dir := a.svc.cfg.Downloads
	name := r.PathValue("file")
	if name == "" {
		return a.downloadIndex(w, r, dir)
	}
	if dir == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return api.Errorf(api.CodeNotFound, "no download %q", name)
	}
	// No link is followed: a link in the directory must not hand out
	// what it points at (the admin token, say).
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ELOOP) {
		return api.Errorf(api.CodeNotFound, "no download %q (GET /download/ lists them)", name)
	}
	if err != nil {
		return fmt.Errorf("download %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("download %s: %w", name, err)
	}
	if !st.Mode().IsRegular() {
		return api.Errorf(api.CodeNotFound, "no download %q", name)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", name))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, name, st.ModTime(), f)
	return nil
}

func (a *API) downloadIndex(w http.ResponseWriter, r *http.Request, dir string) error {
	files, err := downloadFiles(dir)
	if err != nil {
		return err
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'")
	return downloadsPage.Execute(w, struct {
		Base  string
		Files []downloadFile
	}{scheme + "://" + r.Host, files})
}

// downloadFiles lists the directory's regular files with their sums from
// its SHA256SUMS (sha256sum's format), if it has one; none when the
// directory is not configured or not there.
func downloadFiles(dir string) ([]downloadFile, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("downloads: %w", err)
	}
	sums := map[string]string{}
	if f, err := os.Open(filepath.Join(dir, "SHA256SUMS")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if sum, name, ok := strings.Cut(sc.Text(), "  "); ok {
				sums[strings.TrimPrefix(name, "*")] = sum
			}
		}
		f.Close()
	}
	var out []downloadFile
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, downloadFile{Name: e.Name(), Size: info.Size(), Sum: sums[e.Name()]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
