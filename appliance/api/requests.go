package api

// The small request and answer documents of the JSON endpoints. The
// server decodes requests with unknown fields refused, so a field renamed
// here is a breaking change of the contract.

// RegisterRequest redeems an invite for a new account (POST /api/register).
type RegisterRequest struct {
	Invite string `json:"invite"`
	Name   string `json:"name"`
}

// JoinRequest redeems an invite for the caller (POST /api/join).
type JoinRequest struct {
	Invite string `json:"invite"`
}

// Joined lists the leaderboards an invite admitted the caller to.
type Joined struct {
	Leaderboards []string `json:"leaderboards"`
}

// AddUserRequest creates a user (POST /api/admin/users); Role defaults to
// contestant.
type AddUserRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// BanRequest bans or unbans a user.
type BanRequest struct {
	Banned bool `json:"banned"`
}

// TokenRequest issues a new token, optionally revoking the user's others.
type TokenRequest struct {
	RevokeOthers bool `json:"revoke_others"`
}

// HackedRequest marks a submission hacked or clears the mark.
type HackedRequest struct {
	Hacked bool `json:"hacked"`
}

// ReviewRequest clears a flagged submission or confirms it as a cheat.
type ReviewRequest struct {
	Review string `json:"review"` // cleared or confirmed
}

// LeaderboardGone is the answer of DELETE /api/admin/leaderboards/{name}.
type LeaderboardGone struct {
	Leaderboard string `json:"leaderboard"`
	Submissions int    `json:"submissions"` // deleted with it
}

// Revoked is the answer of DELETE /api/admin/invites/{id}: the invite's id.
type Revoked struct {
	Revoked string `json:"revoked"`
}

// DrainRequest stops a slot from taking jobs.
type DrainRequest struct {
	Reason string `json:"reason"`
}

// ProblemLoad is how POST /api/admin/problems loads an uploaded set
// (its query: file, dir, name, gpus, replace, dry_run).
type ProblemLoad struct {
	File    string   // a competition file inside the set, or "" for one problem directory
	Dir     string   // that one problem's directory inside the set ("" for the set itself)
	Name    string   // that one problem's leaderboard name
	GPUs    []string // the GPU types every problem ranks on, in place of the set's
	Replace bool     // replace leaderboards of the same names (else each is refused)
	DryRun  bool     // say what would happen and change nothing
}

// Loaded is the answer of POST /api/admin/problems: one entry per
// problem of the set, each with what was (or, in a dry run, would be)
// done to it. A load is not all or nothing: the problems that can load do.
type Loaded struct {
	Loaded []LoadedProblem `json:"loaded"`
	DryRun bool            `json:"dry_run,omitempty"`
}

// What a load did to one problem (LoadedProblem.Action).
const (
	LoadCreated  = "created"
	LoadUpdated  = "updated"  // the bundled library's own, reloaded
	LoadReplaced = "replaced" // an upload's, asked for with replace
	LoadKept     = "kept"     // left as it was: an upload replaced the library's
	LoadRefused  = "refused"  // the name is taken and replace was not asked
	LoadInvalid  = "invalid"  // the problem did not load: Error says why
)

// Loads reports whether action put the problem on its leaderboard.
func Loads(action string) bool {
	return action == LoadCreated || action == LoadUpdated || action == LoadReplaced
}

// Deleted is the answer of DELETE /api/admin/submissions/ID.
type Deleted struct {
	Deleted int64 `json:"deleted"`
}
