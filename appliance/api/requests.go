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

// DrainRequest stops a slot from taking jobs.
type DrainRequest struct {
	Reason string `json:"reason"`
}

// Loaded is the answer of POST /api/admin/problems.
type Loaded struct {
	Loaded []LoadedProblem `json:"loaded"`
}

// Deleted is the answer of DELETE /api/admin/submissions/ID.
type Deleted struct {
	Deleted int64 `json:"deleted"`
}
