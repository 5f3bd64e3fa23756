package problems

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// The bundled problem library travels inside the binary so `kernelbox eval
// --problem vectoradd` works wherever kernelbox is installed.
//
//go:embed library
var libraryFS embed.FS

// Library returns the bundled problems, rooted at the library directory.
func Library() fs.FS {
	sub, err := fs.Sub(libraryFS, "library")
	if err != nil {
		panic(err) // the embed pattern guarantees the directory
	}
	return sub
}

// LibraryNames lists the bundled problems (directories with a task.yml).
func LibraryNames() []string {
	var names []string
	entries, _ := fs.ReadDir(Library(), ".")
	for _, e := range entries {
		if _, err := fs.Stat(Library(), e.Name()+"/task.yml"); e.IsDir() && err == nil {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// ExportLibrary writes the bundled library into dir, which must not exist
// yet or be empty, and returns dir.
func ExportLibrary(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("export library: %s is not empty", dir)
	}
	if err := os.CopyFS(dir, Library()); err != nil {
		return fmt.Errorf("export library to %s: %w", dir, err)
	}
	return nil
}

// LibraryCompetition is the bundled competition file that opens every
// bundled problem.
const LibraryCompetition = "kernelbox.yaml"

// ResolveProblem turns a --problem argument into a problem directory: an
// existing directory as is, or the name of a bundled problem, exported into
// scratch (a directory the caller removes).
func ResolveProblem(arg, scratch string) (string, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return arg, nil
	}
	if _, err := fs.Stat(Library(), arg+"/task.yml"); err == nil && filepath.Base(arg) == arg {
		lib := filepath.Join(scratch, "library")
		if err := ExportLibrary(lib); err != nil {
			return "", err
		}
		return filepath.Join(lib, arg), nil
	}
	return "", fmt.Errorf("problem %q: no such directory and no bundled problem of that name (see kernelbox problems list): %w", arg, ErrInvalid)
}
