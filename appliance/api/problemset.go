package api

import (
	"archive/tar"
	"compress/gzip"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A problem set travels as a gzipped tar (the body of POST
// /api/admin/problems): the CLI packs a directory, the daemon unpacks it
// into a directory of its own. Both ends live here so that they agree.

// Limits of an uploaded problem set once unpacked.
const (
	maxProblemSetFiles = 20000
	maxProblemSetBytes = 512 << 20
)

// UnpackProblemSet unpacks a gzipped tar into a new directory under parent
// and returns it. Only directories and regular files are taken; a path that
// is absolute or climbs out, a link, or a set too large is refused.
func UnpackProblemSet(r io.Reader, parent string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	dir := filepath.Join(parent, time.Now().UTC().Format("20060102T150405")+"-"+hex.EncodeToString(b[:]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("unpack problem set: %w", err)
	}
	fail := func(err error) (string, error) {
		os.RemoveAll(dir)
		return "", err
	}
	// A body over the upload cap shows up as a read error anywhere below.
	damaged := func(format string, args ...any) (string, error) {
		var mbe *http.MaxBytesError
		for _, a := range args {
			if e, ok := a.(error); ok && errors.As(e, &mbe) {
				return fail(Errorf(CodeTooLarge, "the problem set is over the %d-byte upload limit", mbe.Limit))
			}
		}
		return fail(Errorf(CodeInvalid, format, args...))
	}
	zr, err := gzip.NewReader(r)
	if err != nil {
		return damaged("the problem set is not a gzipped tar: %v", err)
	}
	tr := tar.NewReader(zr)
	var files int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return damaged("the problem set archive is damaged: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." {
			continue
		}
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || strings.Contains(name, "\\") {
			return fail(Errorf(CodeInvalid, "the problem set has a path outside itself: %q", h.Name))
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fail(mkdirError(h.Name, err))
			}
		case tar.TypeReg:
			files++
			total += h.Size
			if files > maxProblemSetFiles || total > maxProblemSetBytes {
				return fail(Errorf(CodeTooLarge, "the problem set unpacks to more than %d files or %d MiB", maxProblemSetFiles, maxProblemSetBytes>>20))
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fail(mkdirError(h.Name, err))
			}
			f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fail(Errorf(CodeInvalid, "the problem set has %q twice or in a bad place: %v", h.Name, err))
			}
			_, err = io.CopyN(f, tr, h.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return damaged("the problem set archive is damaged at %q: %v", h.Name, err)
			}
		default:
			return fail(Errorf(CodeInvalid, "the problem set has %q, which is not a file or a directory (links are not taken)", h.Name))
		}
	}
	return dir, nil
}

// mkdirError is a directory of the set that could not be made: the
// archive's mistake when a file of it is in the way, else the box's.
func mkdirError(name string, err error) error {
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, fs.ErrExist) {
		return Errorf(CodeInvalid, "the problem set has a file where %q needs a directory", name)
	}
	return fmt.Errorf("unpack problem set: %w", err)
}

// PackProblemSet writes root as a gzipped tar, or only the given entries
// of it (files or directories, relative to root) when there are some,
// leaving out hidden entries and Python caches: what `kernelbox admin
// problems load` uploads. Entries keep their place under root, so a
// problem's `../eval.py` arrives beside its directory as it was.
func PackProblemSet(w io.Writer, root string, entries ...string) error {
	if len(entries) == 0 {
		entries = []string{"."}
	}
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	written := map[string]bool{}
	for _, e := range entries {
		if err := packTree(tw, root, filepath.Join(root, e), written); err != nil {
			return fmt.Errorf("pack %s: %w", filepath.Join(root, e), err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// packTree writes top (under root) and what lies below it; the
// directories above it are made by UnpackProblemSet. written keeps an
// entry named twice from being packed twice.
func packTree(tw *tar.Writer, root, top string, written map[string]bool) error {
	return filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." || written[rel] {
			return err // a directory packed already is still walked: an entry may lie below it
		}
		base := d.Name()
		if strings.HasPrefix(base, ".") || base == "__pycache__" || base == "node_modules" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // links and devices are not part of a problem
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		written[rel] = true
		h.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
}
