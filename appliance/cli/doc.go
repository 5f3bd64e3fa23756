// Package cli is the kernelbox command line: the urfave/cli app, its
// commands and how they print. Every contestant and organiser command
// (submit, submissions, leaderboards, queue, gpus, admin ...) is a thin
// wrapper over the typed client of appliance/api; eval and problems run
// the problem harness of package problems on this machine.
//
// It builds on every GOOS without cgo, because contestants submit from
// macOS and Windows laptops. The commands that run the box itself (serve,
// sandbox, doctor, eval --sandbox) need Linux and cgo (libcontainer,
// libseccomp, NVML): they live in files built only there (*_linux.go, with
// the cgo tag) and import the daemon, package appliance; elsewhere
// linux_other.go keeps the commands and says why they do not run.
//
// Files, by command group: app.go (the app, exit statuses, flag order),
// client.go (login, register, join, submit and its progress, submissions,
// leaderboards, queue, gpus, admin), eval.go and problems.go (the local
// harness), serve_linux.go, sandbox_linux.go, doctor_linux.go,
// eval_linux.go.
package cli
