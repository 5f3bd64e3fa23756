package api

import "time"

// ExportRow is one submission in the dataset export (GET
// /api/admin/export, one JSON document a line). The parquet tags give the
// same columns to the CLI's parquet file, so the two formats never differ.
type ExportRow struct {
	ID int64 `json:"id" parquet:"id"`
	// User is the submitter's name, or with anonymise a pseudonym that is
	// stable within one export and differs across exports.
	User        string `json:"user" parquet:"user"`
	Leaderboard string `json:"leaderboard" parquet:"leaderboard"`
	Problem     string `json:"problem" parquet:"problem"`
	GPUType     string `json:"gpu" parquet:"gpu"`
	Mode        string `json:"mode" parquet:"mode"`
	// Category is test or ranked (leaderboard mode).
	Category string `json:"category" parquet:"category"`
	Language string `json:"language" parquet:"language"`
	FileName string `json:"file_name" parquet:"file_name"`
	Code     string `json:"code" parquet:"code"`
	SHA256   string `json:"sha256" parquet:"sha256"`
	// Created and Finished are in UTC; Finished is nil while not settled.
	Created  time.Time  `json:"created" parquet:"created,timestamp(millisecond)"`
	Finished *time.Time `json:"finished" parquet:"finished,optional,timestamp(millisecond)"`
	Status   string     `json:"status" parquet:"status"`
	Passed   bool       `json:"passed" parquet:"passed"`
	Reason   string     `json:"reason" parquet:"reason"`
	Hacked   bool       `json:"hacked" parquet:"hacked"`
	// Review is "", flagged, cleared or confirmed; Findings the scanner's
	// rules that fired, Flags the timing rules the public run raised.
	Review   string   `json:"review" parquet:"review"`
	Findings []string `json:"findings" parquet:"findings,list"`
	Flags    []string `json:"flags" parquet:"flags,list"`
	// Score and ScoreErr are in seconds, nil where not scored.
	Score    *float64 `json:"score" parquet:"score,optional"`
	ScoreErr *float64 `json:"score_err" parquet:"score_err,optional"`
	// Benchmarks are the public run's per-benchmark timings.
	Benchmarks []ExportBenchmark `json:"benchmarks" parquet:"benchmarks,list"`
}

// ExportBenchmark is one benchmark's timing in an export row.
type ExportBenchmark struct {
	Spec   string  `json:"spec" parquet:"spec"`
	MeanNs float64 `json:"mean_ns" parquet:"mean_ns"`
	ErrNs  float64 `json:"err_ns" parquet:"err_ns"`
}

// ExportQuery narrows an export.
type ExportQuery struct {
	Passing   bool // only submissions that passed
	Ranked    bool // only ranked (leaderboard-mode) submissions
	Anonymise bool // pseudonyms in place of user names
}
