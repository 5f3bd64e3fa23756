package appliance

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
	"kernelbox/problems"
)

// The dataset export: every submission with its code, verdicts and
// scores, streamed as JSON lines that the CLI keeps as they are or turns
// into parquet (the format GPU MODE publishes its kernels in).

func (a *API) adminExport(w http.ResponseWriter, r *http.Request) error {
	me := userOf(r)
	if err := adminOnly(me, "an export"); err != nil {
		return err
	}
	var q api.ExportQuery
	for key, to := range map[string]*bool{"passing": &q.Passing, "ranked": &q.Ranked, "anonymise": &q.Anonymise} {
		if v := r.URL.Query().Get(key); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return api.Errorf(api.CodeInvalid, "query %s=%q: want true or false", key, v)
			}
			*to = b
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	// The status goes with the first row (or the end): an error before
	// any row is still answered as an error.
	started := false
	start := func() {
		if !started {
			w.Header().Set("Content-Type", "application/jsonl")
			w.WriteHeader(http.StatusOK)
			started = true
		}
	}
	n := 0
	err := a.svc.Export(r.Context(), q, func(row *api.ExportRow) error {
		start()
		n++
		return enc.Encode(row)
	})
	if err == nil {
		start()
		err = bw.Flush()
	}
	if err != nil && started {
		// Rows are out: cut the stream so the client sees a failure, not
		// a dataset that merely ends early.
		a.log.Error("export failed mid-stream", logUser, me.Name, "rows", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	if err == nil {
		a.log.Info("submissions exported", logUser, me.Name, "rows", n, "anonymised", q.Anonymise)
	}
	return err
}

// Export calls emit with every submission q lets through, oldest first.
//
// With q.Anonymise the user is "user-" and 16 hex digits of HMAC-SHA256
// of the user's id under a key drawn for this export and then forgotten:
// one user is one pseudonym across the export (their submissions can be
// told apart from others'), but two exports cannot be joined on it, and
// without the key no name or id can be tried against it.
func (s *Service) Export(ctx context.Context, q api.ExportQuery, emit func(*api.ExportRow) error) error {
	var key []byte
	if q.Anonymise {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
	}
	return s.store.Export(ctx, store.ExportFilter{Passing: q.Passing, Ranked: q.Ranked}, func(r *store.ExportRow) error {
		row := exportRow(r)
		if key != nil {
			mac := hmac.New(sha256.New, key)
			mac.Write([]byte(strconv.FormatInt(r.UserID(), 10)))
			row.User = "user-" + hex.EncodeToString(mac.Sum(nil))[:16]
		}
		return emit(row)
	})
}

// exportRow turns a stored submission into its export row.
func exportRow(r *store.ExportRow) *api.ExportRow {
	row := &api.ExportRow{ID: r.ID, User: r.User, Leaderboard: r.Leaderboard, Problem: filepath.Base(filepath.FromSlash(r.ProblemDir)),
		GPUType: r.GPUType, Mode: r.Mode, Category: r.Category, Language: r.Language, FileName: r.FileName, Code: string(r.Code),
		SHA256: r.SHA256, Created: r.Created.UTC(), Status: r.Status, Passed: r.Passed, Reason: r.Reason, Hacked: r.Hacked,
		Review: r.Review, Score: r.Score, ScoreErr: r.ScoreErr, Findings: []string{}, Flags: []string{}, Benchmarks: []api.ExportBenchmark{}}
	if problems.IsArchive(r.FileName) {
		// A multi-file submission's archive, as `submissions show --code`
		// prints it: its raw bytes are no text for a dataset.
		row.Code = problems.ArchiveText(r.Code, r.FileName)
	}
	if !r.Finished.IsZero() {
		t := r.Finished.UTC()
		row.Finished = &t
	}
	for _, f := range r.Findings {
		row.Findings = append(row.Findings, f.Rule)
	}
	// The public run's report, where it has one: a run that never ended
	// (or a report from an older harness) leaves the lists empty.
	var rep problems.Report
	if len(r.Report) > 0 && json.Unmarshal(r.Report, &rep) == nil {
		for _, b := range rep.Benchmarks {
			row.Benchmarks = append(row.Benchmarks, api.ExportBenchmark{Spec: b.Spec, MeanNs: b.Mean, ErrNs: b.Err})
		}
		for _, f := range rep.Flags {
			row.Flags = append(row.Flags, f.Rule)
		}
	}
	return row
}
