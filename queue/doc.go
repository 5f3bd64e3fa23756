// Package queue will hold the durable SQLite job queue, the fair-share
// scheduler, GPU leases and crash recovery. It owns one external system
// (its SQLite tables) and imports only the leaf packages. Not implemented
// yet: the appliance issue builds it.
package queue
