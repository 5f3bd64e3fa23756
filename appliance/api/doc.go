// Package api is the wire contract between the kernelbox daemon and its
// clients: the request and response documents of the HTTP API, the typed
// events of a submission's log, the error codes with their HTTP and exit
// mappings, and Client, the typed HTTP client that the CLI and the tests
// use.
//
// It builds on every GOOS without cgo, because contestants submit from
// macOS and Windows laptops: it imports only the standard library and the
// leaf packages problems (the result documents) and policies (the
// scanner's findings). The daemon (package appliance) keeps its own row
// types and translates them into these at its HTTP edge, so a column added
// to the store does not leak onto the wire.
package api
