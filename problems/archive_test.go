package problems

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

type entry struct {
	name, body string
	link       bool
}

func tarGz(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.body)), Typeflag: tar.TypeReg}
		if e.link {
			h = &tar.Header{Name: e.name, Linkname: "/etc/passwd", Typeflag: tar.TypeSymlink}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if !e.link {
			tw.Write([]byte(e.body))
		}
	}
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

func zipped(t *testing.T, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(e.body))
	}
	zw.Close()
	return buf.Bytes()
}

// TestUnpackArchive: a multi-file submission (popcorn-cli sends .tar.gz
// and .zip) unpacks to clean relative paths, a folder's archive without
// its folder, and anything that could land outside the run's directory,
// replace the harness or lack the contestant's file is refused (issue 19).
func TestUnpackArchive(t *testing.T) {
	t.Parallel()
	task := &Task{Name: "p", Files: []File{{Name: "submission.py", Source: SubmissionPlaceholder}, {Name: "eval.py", Source: "eval.py"}}}
	ok := []entry{{name: "submission.py", body: "from helper import f\n"}, {name: "helper.py", body: "def f(): pass\n"}}
	many := make([]entry, maxArchiveFiles+1)
	for i := range many {
		many[i] = entry{name: strings.Repeat("x", i+1) + ".py"}
	}
	for _, tc := range []struct {
		name, file string
		data       []byte
		want       string // error; "" for none
		files      []string
	}{
		{"tar.gz", "k.tar.gz", tarGz(t, ok), "", []string{"helper.py", "submission.py"}},
		{"zip", "k.zip", zipped(t, ok), "", []string{"helper.py", "submission.py"}},
		{"a folder's archive", "k.tgz", tarGz(t, []entry{{name: "kern/submission.py"}, {name: "kern/lib/a.py"}}), "", []string{"lib/a.py", "submission.py"}},
		{"climbs out", "k.tar.gz", tarGz(t, []entry{{name: "submission.py"}, {name: "../x.py"}}), "a path outside itself", nil},
		{"absolute", "k.zip", zipped(t, []entry{{name: "submission.py"}, {name: "/etc/x"}}), "a path outside itself", nil},
		{"link", "k.tar.gz", tarGz(t, []entry{{name: "submission.py"}, {name: "l", link: true}}), "links are not taken", nil},
		{"no submission", "k.tar.gz", tarGz(t, []entry{{name: "helper.py"}, {name: "other.py"}}), "no submission.py at its top", nil},
		{"the harness's name", "k.zip", zipped(t, []entry{{name: "submission.py"}, {name: "eval.py"}}), "eval.py, which is the problem's own file", nil},
		{"file and folder", "k.tar.gz", tarGz(t, []entry{{name: "submission.py"}, {name: "a"}, {name: "a/b.py"}}), "as a file and as a directory", nil},
		{"too many", "k.tar.gz", tarGz(t, append(many, entry{name: "submission.py"})), "more than 256 files", nil},
		{"not an archive", "k.zip", []byte("def custom_kernel(x): pass\n"), "not a zip file", nil},
	} {
		files, err := UnpackArchive(tc.data, tc.file)
		if err == nil {
			err = task.CheckArchive(files)
		}
		switch {
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "":
			var names []string
			for _, f := range files {
				names = append(names, f.Name)
			}
			if strings.Join(names, " ") != strings.Join(tc.files, " ") {
				t.Errorf("%s: files %v, want %v", tc.name, names, tc.files)
			}
		}
	}
	if got := ArchiveText(tarGz(t, ok), "k.tar.gz"); !strings.Contains(got, "# ---- helper.py\ndef f(): pass\n") {
		t.Errorf("ArchiveText = %q; want each file under a header", got)
	}
}
