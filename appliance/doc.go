// Package appliance is the daemon (`kernelbox serve`): its store, its
// runner, its HTTP API and its configuration. It is the only package that
// imports the systems below it (problems, policies, queue, sandbox, gpu);
// the wire contract it serves is package appliance/api, and the command
// line that starts it is package appliance/cli, which cmd/kernelbox wires.
//
// The pieces, by file:
//   - appliance/store (a package of its own): users, tokens, invites,
//     leaderboards, submissions, runs and the event log, in one SQLite file
//     with the queue's jobs; a submission and its jobs are stored in one
//     transaction.
//   - service.go, queries.go, staff.go: the service, everything between the
//     API and the store and queue: the checks of a submission, the reads, and
//     the organisers' operations with the rules of who may do what.
//   - appliance/runner (a package of its own): one dispatcher per GPU
//     type that claims jobs for gangs of slots, one job's steps (take the
//     run, execute it under a heartbeat, judge, record), warm starts,
//     standbys, compile caches, the canary and the sandboxed harness
//     launcher (built in one place for the daemon and `kernelbox eval
//     --sandbox`). It declares what it needs of the store, the queue and
//     the GPU monitor, and is built from one runner.Deps (daemon.go).
//   - host.go: what the daemon sets up on the host for the runner: the GPU
//     monitor and its clock locks, the interpreter, the sandbox.
//   - slurm.go: the slurm executor (a runner.Executor): a Slurm job per
//     run, whose node runs node.go's `kernelbox node run-job` and reports
//     through nodeapi.go's endpoints with a per-run token.
//   - api.go, api_admin.go, profile.go: the HTTP API's handlers, which
//     decode a request, call one service method and write its answer.
//   - daemon.go, config.go: start-up, recovery and graceful shutdown.
package appliance
