// Package runner runs the daemon's jobs on its slots: it claims jobs from
// the queue, one dispatcher per GPU type, runs each on a gang of free
// slots (here in the sandbox, or elsewhere through an Executor), judges
// what came back and records it in the store. Warm starts, standby
// harnesses, the users' compile caches and the canary live here too.
//
// It is built from one Deps at New and declares the interfaces it needs
// of the queue, the store and the GPU monitor. It may import the wire
// contract (appliance/api), the store (appliance/store), queue, gpu,
// sandbox, problems and policies; never the appliance package, which
// wires it.
package runner

// Log attribute keys (docs/architecture.md, rule 14), as the appliance
// names them.
const (
	logSubmission = "submission"
	logRun        = "run"
	logJob        = "job"
	logSlot       = "slot"
	logUser       = "user"
)
