package api

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// The backup archive (GET /api/admin/backup) is part of the contract: the
// daemon writes it, the CLI checks it as it lands, and restore reads it,
// perhaps with another kernelbox's binary. It is a tar.gz of the
// database's snapshot, the data directory's files, and last a manifest
// with every file's sha256 (known only once the file is written): an
// archive cut short has no manifest and is refused as a whole.

// BackupFormat is the archive's layout version; a restore refuses others.
const BackupFormat = 1

// The archive's fixed names.
const (
	BackupDB       = "kernelbox.db"
	BackupMarks    = "store-marks.json"
	BackupManifest = "manifest.json"
)

// BackupTrees and BackupFiles are the data directory's parts an archive
// holds besides the database and the marks.
var (
	BackupTrees = []string{"problems", "profiles"}
	BackupFiles = []string{"admin-token"}
)

// StoreMarks are what a data directory records of its database to notice
// a loss: the database's identity and the highest ids it has handed out.
type StoreMarks struct {
	StoreID     string `json:"store_id"`
	Submissions int64  `json:"submissions"`
	Runs        int64  `json:"runs"`
}

// StoreSummary is what a database file holds, in numbers.
type StoreSummary struct {
	StoreMarks
	Users        int64 `json:"users"`
	Leaderboards int64 `json:"leaderboards"`
	// Count is the number of submissions (StoreMarks.Submissions is the
	// highest id handed out, deleted ones included).
	Count int64 `json:"submission_count"`
}

// Manifest describes a backup archive.
type Manifest struct {
	Format  int       `json:"format"`
	Version string    `json:"version"` // the kernelbox that wrote it
	Created time.Time `json:"created"`
	// Database is the database as backed up.
	Database StoreSummary `json:"database"`
	// Marks is the box's record of ids handed out as the backup ended,
	// some perhaps after the database's snapshot: a restore never hands
	// them out again.
	Marks StoreMarks   `json:"marks"`
	Files []BackupFile `json:"files"`
}

// BackupFile is one file of the archive, the manifest aside.
type BackupFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// ErrBadBackup is an archive that is not a whole, sound kernelbox backup.
var ErrBadBackup = errors.New("not a sound kernelbox backup")

// ReadBackup reads an archive through, checking every name and checksum
// against its manifest, and hands each file to put (nil: only check). It
// returns the manifest only when the whole archive is sound.
func ReadBackup(r io.Reader, put func(name string, mode int64, body io.Reader) error) (*Manifest, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
	}
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, bad("not a gzip file (%v): is it a backup from `kernelbox admin backup`?", err)
	}
	tr := tar.NewReader(gz)
	seen := map[string]BackupFile{}
	var m *Manifest
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if errors.Is(err, tar.ErrHeader) {
			return nil, bad("not a tar archive inside the gzip (%v): is it a backup from `kernelbox admin backup`?", err)
		}
		if err != nil {
			return nil, bad("%s", cutShort(err))
		}
		if m != nil {
			return nil, bad("%s comes after the manifest", hdr.Name)
		}
		if hdr.Typeflag == tar.TypeDir {
			continue
		}
		if hdr.Name == BackupManifest {
			m = &Manifest{}
			if err := json.NewDecoder(io.LimitReader(tr, 64<<20)).Decode(m); err != nil {
				return nil, bad("its manifest is not JSON: %s", cutShort(err))
			}
			continue
		}
		if err := backupName(hdr.Name); err != nil {
			return nil, bad("%v", err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, bad("%s is not a regular file (type %q)", hdr.Name, hdr.Typeflag)
		}
		if _, dup := seen[hdr.Name]; dup {
			return nil, bad("%s is in it twice", hdr.Name)
		}
		h := sha256.New()
		body := io.TeeReader(tr, h)
		if put != nil {
			err = put(hdr.Name, hdr.Mode, body)
		} else {
			_, err = io.Copy(io.Discard, body)
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, bad("%s: %s", hdr.Name, cutShort(err))
			}
			return nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
		seen[hdr.Name] = BackupFile{Name: hdr.Name, Size: hdr.Size, SHA256: hex.EncodeToString(h.Sum(nil))}
	}
	if m == nil {
		return nil, bad("it has no manifest: it is cut short (an interrupted backup or copy) or not a kernelbox backup")
	}
	if m.Format != BackupFormat {
		return nil, bad("format %d; this kernelbox reads format %d", m.Format, BackupFormat)
	}
	for _, f := range m.Files {
		got, ok := seen[f.Name]
		switch {
		case !ok:
			return nil, bad("%s is in the manifest but not in the archive", f.Name)
		case got.SHA256 != f.SHA256 || got.Size != f.Size:
			return nil, bad("%s does not match its checksum (%d bytes, sha256 %.12s…; the manifest says %d bytes, %.12s…): the archive is damaged",
				f.Name, got.Size, got.SHA256, f.Size, f.SHA256)
		}
		delete(seen, f.Name)
	}
	for name := range seen {
		return nil, bad("%s is in the archive but not in its manifest", name)
	}
	if _, ok := seenName(m.Files, BackupDB); !ok || m.Database.StoreID == "" {
		return nil, bad("it holds no database")
	}
	return m, nil
}

func seenName(files []BackupFile, name string) (BackupFile, bool) {
	for _, f := range files {
		if f.Name == name {
			return f, true
		}
	}
	return BackupFile{}, false
}

// cutShort words a reader's error: a truncated archive says so.
func cutShort(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "it ends in the middle (cut short: an interrupted backup or copy)"
	}
	return err.Error()
}

// backupName admits only the names a backup writes, so that no archive
// entry lands outside the data directory or on a part of it a backup
// never holds.
func backupName(name string) error {
	if name != path.Clean(name) || path.IsAbs(name) || strings.HasPrefix(name, "../") || name == ".." {
		return fmt.Errorf("%q is not a clean relative path", name)
	}
	switch name {
	case BackupDB, BackupMarks:
		return nil
	}
	for _, f := range BackupFiles {
		if name == f {
			return nil
		}
	}
	for _, tree := range BackupTrees {
		if strings.HasPrefix(name, tree+"/") {
			return nil
		}
	}
	return fmt.Errorf("%q is not part of a backup", name)
}
