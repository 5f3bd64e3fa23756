// Package appliance is the orchestrator: the command line, and (in later
// work) the daemon, its HTTP API, the store and the runner. It is the only
// package that imports the others (problems, policies, queue, sandbox, gpu);
// cmd/kernelbox imports only appliance.
package appliance
