package problems

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"unicode/utf8"
)

// A submission may be an archive (.zip, .tar.gz, .tgz) of several files,
// as popcorn-cli sends for multi-file kernels: it holds the file the task
// names for the contestant (submission.py) and whatever that imports.

// Bounds of an archive once unpacked: a kernel's sources, not a dataset.
const (
	maxArchiveFiles = 256
	maxArchiveBytes = 32 << 20
)

// ArchiveFile is one file of a submitted archive.
type ArchiveFile struct {
	Name string // a clean relative path
	Data []byte
}

// IsArchive says whether a submission's file name is an archive's.
func IsArchive(name string) bool {
	n := strings.ToLower(name)
	return strings.HasSuffix(n, ".zip") || strings.HasSuffix(n, ".tar.gz") || strings.HasSuffix(n, ".tgz")
}

// UnpackArchive reads a submitted archive named name. Only regular files
// (and directories) are taken, each at a clean relative path; a link, a
// path that climbs out, or an archive over the bounds is refused. When
// everything lies in one top-level directory, as an archive of a folder
// does, that directory is taken off.
func UnpackArchive(data []byte, name string) ([]ArchiveFile, error) {
	var files []ArchiveFile
	var total int64
	add := func(p string, r io.Reader, size int64) error {
		clean := path.Clean(strings.TrimPrefix(p, "./"))
		if clean == "." || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p, "\\") {
			return fmt.Errorf("the archive has a path outside itself: %q", p)
		}
		if len(files) == maxArchiveFiles || total+size > maxArchiveBytes {
			return fmt.Errorf("the archive unpacks to more than %d files or %d MiB", maxArchiveFiles, maxArchiveBytes>>20)
		}
		b, err := io.ReadAll(io.LimitReader(r, maxArchiveBytes-total+1))
		if err != nil {
			return fmt.Errorf("the archive is damaged at %q: %v", p, err)
		}
		if total += int64(len(b)); total > maxArchiveBytes {
			return fmt.Errorf("the archive unpacks to more than %d MiB", maxArchiveBytes>>20)
		}
		files = append(files, ArchiveFile{Name: clean, Data: b})
		return nil
	}
	var err error
	if strings.HasSuffix(strings.ToLower(name), ".zip") {
		err = readZip(data, add)
	} else {
		err = readTarGz(data, add)
	}
	if err != nil {
		return nil, err
	}
	files = stripTop(files)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	names, dirs := map[string]bool{}, map[string]bool{}
	for _, f := range files {
		if names[f.Name] {
			return nil, fmt.Errorf("the archive has %q twice", f.Name)
		}
		names[f.Name] = true
		for d := path.Dir(f.Name); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for n := range names {
		if dirs[n] {
			return nil, fmt.Errorf("the archive has %q as a file and as a directory", n)
		}
	}
	return files, nil
}

func readZip(data []byte, add func(string, io.Reader, int64) error) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("the archive is not a zip file: %v", err)
	}
	for _, f := range zr.File {
		mode := f.Mode()
		switch {
		case mode.IsDir():
			continue
		case !mode.IsRegular():
			return fmt.Errorf("the archive has %q, which is not a file (links are not taken)", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return fmt.Errorf("the archive is damaged at %q: %v", f.Name, err)
		}
		err = add(f.Name, rc, int64(f.UncompressedSize64))
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func readTarGz(data []byte, add func(string, io.Reader, int64) error) error {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("the archive is not a gzipped tar: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("the archive is damaged: %v", err)
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeReg:
			if err := add(h.Name, tr, h.Size); err != nil {
				return err
			}
		default:
			return fmt.Errorf("the archive has %q, which is not a file (links are not taken)", h.Name)
		}
	}
}

// stripTop takes off a directory that holds every file.
func stripTop(files []ArchiveFile) []ArchiveFile {
	if len(files) == 0 {
		return files
	}
	top, _, ok := strings.Cut(files[0].Name, "/")
	if !ok {
		return files
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Name, top+"/") {
			return files
		}
	}
	for i := range files {
		files[i].Name = strings.TrimPrefix(files[i].Name, top+"/")
	}
	return files
}

// CheckArchive says whether an archive's files can stand for the task's
// submission: the contestant's file at the top, and nothing in the place
// of a file the task brings (the harness, the reference).
func (t *Task) CheckArchive(files []ArchiveFile) error {
	want := t.SubmissionFile()
	found := false
	taken := map[string]bool{}
	for _, f := range t.Files {
		if f.Source != SubmissionPlaceholder {
			taken[f.Name] = true
		}
	}
	for _, f := range files {
		found = found || f.Name == want
		if taken[f.Name] {
			return fmt.Errorf("the archive has %s, which is the problem's own file", f.Name)
		}
	}
	if !found {
		return fmt.Errorf("the archive has no %s at its top: it is the file the harness runs", want)
	}
	return nil
}

// ArchiveText shows an archive's files for reading: each text file under
// a header line, a binary one by its size.
func ArchiveText(data []byte, name string) string {
	files, err := UnpackArchive(data, name)
	if err != nil {
		return fmt.Sprintf("# %s: %v\n", name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %d files\n", name, len(files))
	for _, f := range files {
		if utf8.Valid(f.Data) {
			fmt.Fprintf(&b, "# ---- %s\n%s", f.Name, f.Data)
			if len(f.Data) > 0 && f.Data[len(f.Data)-1] != '\n' {
				b.WriteByte('\n')
			}
		} else {
			fmt.Fprintf(&b, "# ---- %s (%d bytes, not text)\n", f.Name, len(f.Data))
		}
	}
	return b.String()
}
