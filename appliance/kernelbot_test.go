package appliance

import (
	"strings"
	"testing"

	"kernelbox/appliance/api"
)

// TestSubmit_KernelBotDirectives: a file's `#!POPCORN leaderboard` may name
// the problem's directory where the competition file named the leaderboard
// otherwise (vectoradd_py for vectoradd_v2), and a `#!POPCORN gpu` the box
// cannot serve is refused instead of quietly running on another GPU type
// (issue 19).
func TestSubmit_KernelBotDirectives(t *testing.T) {
	t.Parallel()
	svc, st := quickService(t, "quick_v2") // the problem's directory is quick
	ctx := t.Context()
	ann, _, err := st.CreateUser(ctx, "ann", api.RoleContestant)
	if err != nil {
		t.Fatal(err)
	}
	body := "def custom_kernel(xs):\n    return [2 * x for x in xs]\n"
	for _, tc := range []struct {
		name, flag, head, want string
	}{
		{"directory name", "", "#!POPCORN leaderboard quick\n", ""},
		{"directory name beside the flag", "quick_v2", "#!POPCORN leaderboard quick\n", ""},
		{"alias as the flag", "quick", "", ""},
		{"another leaderboard", "quick_v2", "#!POPCORN leaderboard vectoradd\n", "#!POPCORN leaderboard is vectoradd but --leaderboard is quick_v2"},
		{"unknown", "", "#!POPCORN leaderboard nope\n", "nope"},
		{"gpu the box lacks", "", "#!POPCORN leaderboard quick_v2\n#!POPCORN gpu H100\n", "#!POPCORN gpu asks for H100; leaderboard quick_v2 runs here on cpu"},
		{"gpu the box has", "", "#!POPCORN leaderboard quick_v2\n#!POPCORN gpu H100 cpu\n", ""},
	} {
		sub, err := svc.Submit(ctx, ann, api.SubmitRequest{Leaderboard: tc.flag, Mode: "test", FileName: "k.py", Code: []byte(tc.head + body)})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && (sub.Leaderboard != "quick_v2" || sub.GPUType != "cpu"):
			t.Errorf("%s: submitted to %s on %s; want quick_v2 on cpu", tc.name, sub.Leaderboard, sub.GPUType)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
