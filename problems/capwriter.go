package problems

import "bytes"

// CapWriter keeps the first Limit bytes written to it and counts the rest
// (a run's output cap): a run that floods its output costs the box no
// memory, and the reader learns that output was cut. It never fails a
// write, so the writer is not killed by a broken pipe.
type CapWriter struct {
	Limit   int
	buf     bytes.Buffer
	dropped int64
}

// NewCapWriter keeps at most limit bytes.
func NewCapWriter(limit int) *CapWriter { return &CapWriter{Limit: limit} }

// Write keeps what fits and drops the rest.
func (w *CapWriter) Write(p []byte) (int, error) {
	room := w.Limit - w.buf.Len()
	if room >= len(p) {
		return w.buf.Write(p)
	}
	if room > 0 {
		w.buf.Write(p[:room])
	}
	w.dropped += int64(len(p) - max(room, 0))
	return len(p), nil
}

// Bytes are the kept bytes.
func (w *CapWriter) Bytes() []byte { return w.buf.Bytes() }

// Dropped counts the bytes that did not fit.
func (w *CapWriter) Dropped() int64 { return w.dropped }
