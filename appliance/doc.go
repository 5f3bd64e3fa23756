// Package appliance is the orchestrator: the command line, the daemon
// (`kernelbox serve`), its store, its runner and its HTTP API, and the
// typed client every other command uses. It is the only package that
// imports the others (problems, policies, queue, sandbox, gpu);
// cmd/kernelbox imports only appliance.
//
// The pieces, by file:
//   - store.go, leaderboards.go, submissions.go: the appliance's SQLite
//     database (users, hashed tokens, invites, leaderboards, submissions,
//     runs, the append-only event log). The jobs live in the queue's own
//     file; the two are tied by idempotent job keys and reconciled at start
//     and after a reap or a failed enqueue.
//   - service.go: the checks of a submission and everything between the API
//     and the store and queue.
//   - runner.go: one goroutine per slot that claims, runs and records jobs.
//   - api.go, errors.go: the HTTP API and its one error model.
//   - daemon.go, config.go: start-up, recovery and graceful shutdown.
//   - client.go, clientcmd.go, cli.go: the client and the commands.
package appliance
