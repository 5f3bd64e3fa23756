// Package kernelbox is the module root; it holds only module-wide tests
// (the import-direction check). The code lives in the top-level packages
// appliance, queue, sandbox, gpu, policies and problems.
package kernelbox
