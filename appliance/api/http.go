package api

// HTTP helpers the daemon's fronts share (the API, popcorn's protocol and
// the pages), kept beside the contract they serve.

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
)

// SubmissionID reads a route's {id} as a submission id: the one check of
// the API's, popcorn's and the pages' routes.
func SubmissionID(r *http.Request) (int64, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, Errorf(CodeInvalid, "submission id %q is not a positive number", r.PathValue("id"))
	}
	return id, nil
}

// ServeProfile sends a run's opened Nsight Compute report as a download,
// for the API and the pages alike.
func ServeProfile(w http.ResponseWriter, r *http.Request, id int64, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", fmt.Sprintf("submission-%d.ncu-rep", id)))
	http.ServeContent(w, r, "", st.ModTime(), f)
	return nil
}
