// Package store is the daemon's state: users, hashed tokens and invites,
// leaderboards, submissions (their code stored once by SHA-256), runs and
// the append-only event log, in one SQLite file with the queue's jobs, so
// that a submission and its jobs are stored in one transaction
// (queue.EnqueueTx). It also merges the queue's file of a data directory
// written before the two shared one file (MergeQueueFile).
//
// It imports the wire contract (appliance/api) for the documents its rows
// embed, queue for the shared file, and the leaf policies.
package store
