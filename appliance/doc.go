// Package appliance is the daemon (`kernelbox serve`): its store, its
// runner, its HTTP API and its configuration. It is the only package that
// imports the systems below it (problems, policies, queue, sandbox, gpu);
// the wire contract it serves is package appliance/api, and the command
// line that starts it is package appliance/cli, which cmd/kernelbox wires.
//
// The pieces, by file:
//   - store.go, leaderboards.go, submissions.go: the appliance's tables
//     (users, hashed tokens, invites, leaderboards, submissions, runs, the
//     append-only event log) in one SQLite file with the queue's jobs; a
//     submission and its jobs are stored in one transaction.
//   - legacy.go: the merge of a two-file data directory's queue.db.
//   - service.go: the checks of a submission and everything between the API
//     and the store and queue.
//   - runner.go: one dispatcher per GPU type that claims, runs and
//     records jobs on gangs of slots.
//   - launcher.go: the sandboxed harness launcher, built in one place for
//     the daemon and `kernelbox eval --sandbox`.
//   - api.go, profile.go, problemset.go: the HTTP API's handlers.
//   - daemon.go, config.go: start-up, recovery and graceful shutdown.
package appliance
