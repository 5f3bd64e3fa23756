// Package queue is the durable SQLite job queue: jobs, GPU-slot leases with
// fencing tokens, per-user fair share, and recovery of leases that a crashed
// or earlier daemon left behind. It owns its tables and their migrations and
// imports only the leaf packages.
//
// A job moves queued → leased → running → succeeded | failed | cancelled |
// timed_out. Every change after the claim presents the lease token the claim
// returned; a holder whose lease was reaped and given to someone else gets
// ErrLeaseLost instead of overwriting the new holder's state.
package queue
