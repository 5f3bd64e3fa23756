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
//   - deps.go: the interfaces the daemon consumes (the sandbox, the queue,
//     the store, the GPU monitor), with compile-time checks.
//   - runner.go, slots.go, job.go: one dispatcher per GPU type that claims
//     jobs for gangs of slots, and one job's steps (take the run, execute
//     it under a heartbeat, judge, record).
//   - executor.go: how a run is carried out: local (runner.execute on
//     this box's slots) or slurm (slurm.go: a Slurm job per run, whose
//     node runs node.go's `kernelbox node run-job` and reports through
//     nodeapi.go's endpoints with a per-run token).
//   - launcher.go: the sandboxed harness launcher, built in one place for
//     the daemon and `kernelbox eval --sandbox`.
//   - api.go, api_admin.go, profile.go: the HTTP API's handlers, which
//     decode a request, call one service method and write its answer.
//   - daemon.go, config.go: start-up, recovery and graceful shutdown.
package appliance
