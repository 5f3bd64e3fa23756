// Package problems holds the problem and competition format (task.yml and
// competition yaml, compatible with GPU MODE's reference-kernels), the Go
// side of the harness protocol (cases file, POPCORN result stream, exit
// codes, scoring), the evaluation pipeline that drives a harness through its
// phases, and the bundled problem library with its Python harness.
//
// problems is a leaf: it imports only the standard library and YAML. It
// runs processes only through the Launcher interface it declares, so the
// appliance can put the sandbox behind it while `kernelbox eval` uses
// ExecLauncher on the host.
package problems
