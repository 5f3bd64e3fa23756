package popcorn

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"kernelbox/appliance/api"
	"kernelbox/appliance/store"
)

// submitStreaming is popcorn's older submission (every mode up to
// v1.3.15, profile mode since): the answer is an event stream of status
// events while the submission waits and runs, then one result or error
// event. popcorn's parser splits messages at "\n\n" only and keeps one
// data line each, so every payload is one line of JSON.
func (h *Handler) submitStreaming(w http.ResponseWriter, r *http.Request, u *store.User) error {
	sub, err := h.upload(w, r, u)
	if err != nil {
		return err // before the stream: a plain error answer
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	// A write that fails is a client gone: the stream ends there.
	send := func(event string, v any) bool {
		data, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	start := time.Now()
	status := ""
	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	for {
		changed, release := h.svc.Changed(sub.ID)
		v, err := h.svc.SubmissionView(r.Context(), u, sub.ID, false)
		if err != nil {
			release()
			detail := err.Error()
			if api.ErrorCode(err) == api.CodeInternal {
				h.log.Error("popcorn stream failed", "submission", sub.ID, "err", err)
				detail = "internal error; the server's log has the details"
			}
			send("error", map[string]any{"status": "error", "detail": detail, "status_code": api.HTTPStatus(api.ErrorCode(err))})
			return nil
		}
		if api.Ended(v.Status) {
			release()
			if j := jobOf(v.Submission); j.Status != "succeeded" && len(v.Runs) == 0 && j.Error != nil {
				send("error", map[string]any{"status": "error", "detail": *j.Error})
				return nil
			}
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			send("result", wireResult(v, fmt.Sprintf("%s://%s/api/submissions/%d/profile", scheme, r.Host, v.ID)))
			return nil
		}
		if v.Status != status {
			status = v.Status
			if !send("status", map[string]any{"status": status, "message": fmt.Sprintf("submission %d is %s", v.ID, status),
				"elapsed_time": time.Since(start).Seconds()}) {
				release()
				return nil
			}
		}
		select {
		case <-changed:
		case <-tick.C:
			if !send("status", map[string]any{"status": "processing", "elapsed_time": time.Since(start).Seconds()}) {
				release()
				return nil
			}
		case <-h.stopping:
			release()
			send("error", map[string]any{"status": "error", "detail": fmt.Sprintf("the server is shutting down; submission %d goes on: see it with popcorn submissions show %d", sub.ID, sub.ID)})
			return nil
		case <-r.Context().Done():
			release()
			return nil
		}
		release()
	}
}
