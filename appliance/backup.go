package appliance

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// A backup is a tar.gz of what the box cannot make again: a consistent
// snapshot of kernelbox.db (users, token hashes, leaderboards, every
// submission's code and results, the queue), the problem sets
// (problems/), the kept Nsight reports (profiles/), the admin token and
// the record of ids handed out (store-marks.json). Compile caches, run
// scratch and the sandbox's files are left out: the daemon makes them
// again. The manifest comes last, because it holds every file's sha256,
// known only once the file is written: an archive cut short has none and
// is refused as a whole.

// adminOnly refuses organisers: a backup or an export holds every
// token's hash and everybody's code.
func adminOnly(me *store.User, what string) error {
	if me.Role != api.RoleAdmin {
		return api.Errorf(api.CodeForbidden, "%s is a %s; %s needs an admin", me.Name, me.Role, what)
	}
	return nil
}

func (a *API) adminBackup(w http.ResponseWriter, r *http.Request) error {
	me := userOf(r)
	if err := adminOnly(me, "a backup"); err != nil {
		return err
	}
	snap, err := a.svc.snapshot(r.Context())
	if err != nil {
		return err
	}
	defer snap.remove()
	w.Header().Set("Content-Type", "application/gzip")
	w.Header().Set("Content-Disposition", `attachment; filename="kernelbox-backup.tar.gz"`)
	w.WriteHeader(http.StatusOK)
	m, err := a.svc.writeBackup(r.Context(), w, snap)
	if err != nil {
		// The status is sent: cut the stream, so that the client sees an
		// error rather than an archive that merely lacks its manifest.
		a.log.Error("backup failed mid-stream", logUser, me.Name, "err", err)
		panic(http.ErrAbortHandler)
	}
	a.log.Info("backup taken", logUser, me.Name, "submissions", m.Database.Count, "files", len(m.Files))
	return nil
}

// dbSnapshot is a consistent copy of the database in a scratch directory.
type dbSnapshot struct {
	dir, path string
	summary   api.StoreSummary
	marks     api.StoreMarks
}

func (s *dbSnapshot) remove() { os.RemoveAll(s.dir) }

// snapshot copies the database and reads the marks after it, so that the
// marks cover every id the copy holds. The copy goes under work/, which
// the next start clears should the daemon die mid-backup.
func (s *Service) snapshot(ctx context.Context) (*dbSnapshot, error) {
	work := filepath.Join(s.cfg.DataDir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	dir, err := os.MkdirTemp(work, "backup-")
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	snap := &dbSnapshot{dir: dir, path: filepath.Join(dir, api.BackupDB)}
	if err := store.Snapshot(ctx, filepath.Join(s.cfg.DataDir, "kernelbox.db"), snap.path); err != nil {
		snap.remove()
		return nil, fmt.Errorf("backup: %w", err)
	}
	if snap.summary, err = store.Inspect(ctx, snap.path); err != nil {
		snap.remove()
		return nil, fmt.Errorf("backup: the snapshot fails its check: %w", err)
	}
	snap.marks = snap.summary.StoreMarks
	if rec, ok := s.marks.current(); ok {
		snap.marks.Submissions = max(snap.marks.Submissions, rec.Submissions)
		snap.marks.Runs = max(snap.marks.Runs, rec.Runs)
	}
	return snap, nil
}

// current is the record as it stands; ok is false without one (a service
// that runs without a data directory's record, in tests).
func (sm *storeMarks) current() (api.StoreMarks, bool) {
	if sm == nil {
		return api.StoreMarks{}, false
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	return sm.last, true
}

// writeBackup streams the archive of snap and the data directory's files.
func (s *Service) writeBackup(ctx context.Context, w io.Writer, snap *dbSnapshot) (*api.Manifest, error) {
	m := &api.Manifest{Format: api.BackupFormat, Version: s.cfg.Version, Created: s.now().UTC(), Database: snap.summary, Marks: snap.marks, Files: []api.BackupFile{}}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name, src string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := os.Open(src)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the walk saw it (a deleted leaderboard's profile)
		}
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, fi.Size()))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n != fi.Size() {
			return fmt.Errorf("%s: it shrank from %d to %d bytes while being read", name, fi.Size(), n)
		}
		m.Files = append(m.Files, api.BackupFile{Name: name, Size: n, SHA256: hex.EncodeToString(h.Sum(nil))})
		return nil
	}
	addBytes := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: m.Created, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := writeArchive(m, add, addBytes, snap, s.cfg.DataDir); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if err := gz.Close(); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// writeArchive writes the archive's entries in order: the database, the
// marks, the files and trees of the data directory, the manifest last.
func writeArchive(m *api.Manifest, add func(name, src string) error, addBytes func(string, []byte) error,
	snap *dbSnapshot, dataDir string) error {
	if err := add(api.BackupDB, snap.path); err != nil {
		return err
	}
	b, err := json.Marshal(snap.marks)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if err := addBytes(marksFile, b); err != nil {
		return err
	}
	sum := sha256.Sum256(b)
	m.Files = append(m.Files, api.BackupFile{Name: marksFile, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])})
	for _, name := range api.BackupFiles {
		if err := add(name, filepath.Join(dataDir, name)); err != nil {
			return err
		}
	}
	for _, tree := range api.BackupTrees {
		err := filepath.WalkDir(filepath.Join(dataDir, tree), func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			if d.IsDir() || !d.Type().IsRegular() || atomicTemp.MatchString(d.Name()) {
				return nil
			}
			rel, err := filepath.Rel(dataDir, p)
			if err != nil {
				return err
			}
			return add(filepath.ToSlash(rel), p)
		})
		if err != nil {
			return err
		}
	}
	if b, err = json.MarshalIndent(m, "", "  "); err != nil {
		return err
	}
	return addBytes(api.BackupManifest, append(b, '\n'))
}

// atomicTemp matches the half-written files of problems.WriteFileAtomic
// (".name.123456"): not the box's data yet.
var atomicTemp = regexp.MustCompile(`^\..+\.[0-9]+$`)

// VerifyBackup reads a backup archive through and returns its manifest
// when every file is there and matches its checksum.
func VerifyBackup(r io.Reader) (*api.Manifest, error) { return api.ReadBackup(r, nil) }
