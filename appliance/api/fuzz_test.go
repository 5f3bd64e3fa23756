package api

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func tarGzOf(tb testing.TB, entries ...*tar.Header) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, h := range entries {
		body := strings.Repeat("x", int(h.Size))
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzUnpackProblemSet: any upload either unpacks into one new directory
// under the parent holding only directories and regular files, or is
// refused as the client's mistake (invalid, too large) leaving nothing
// behind, never a server error.
func FuzzUnpackProblemSet(f *testing.F) {
	reg := func(name string, size int64) *tar.Header {
		return &tar.Header{Name: name, Typeflag: tar.TypeReg, Size: size, Mode: 0o644}
	}
	f.Add(tarGzOf(f, &tar.Header{Name: "p/", Typeflag: tar.TypeDir, Mode: 0o755}, reg("p/task.yml", 5), reg("p/eval.py", 3)))
	f.Add(tarGzOf(f, &tar.Header{Name: "task.yml", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}))
	f.Add(tarGzOf(f, reg("../../x", 1)))
	f.Add(tarGzOf(f, reg("a", 1), reg("a/b", 1))) // a file where a directory must go
	f.Add(tarGzOf(f, reg("a", 1), reg("a", 1)))
	f.Add(tarGzOf(f, reg("a", 1), &tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755}))
	f.Add([]byte("not a tarball"))
	parent := f.TempDir()
	f.Fuzz(func(t *testing.T, archive []byte) {
		dir, err := UnpackProblemSet(bytes.NewReader(archive), parent)
		if err != nil {
			if c := ErrorCode(err); c != CodeInvalid && c != CodeTooLarge {
				t.Fatalf("refused as %s (%v), want invalid or too_large", c, err)
			}
			if left, _ := os.ReadDir(parent); len(left) != 0 {
				t.Fatalf("a refused upload left %d entries behind", len(left))
			}
			return
		}
		defer os.RemoveAll(dir)
		if filepath.Dir(dir) != parent {
			t.Fatalf("unpacked into %s, not a new directory of %s", dir, parent)
		}
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				t.Errorf("%s is neither a file nor a directory (%v)", p, d.Type())
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
