package problems

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDirectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		src     string
		want    Directives
		wantErr string
	}{
		{name: "none", src: "import torch\n"},
		{name: "python", src: "#!POPCORN leaderboard vectoradd\n#!POPCORN gpu H200 cpu\nimport torch\n",
			want: Directives{Leaderboard: "vectoradd", GPUs: []string{"H200", "cpu"}}},
		{name: "cuda and commas", src: "  //!POPCORN gpus H100,B200\n//!POPCORN leaderboard grayscale\n",
			want: Directives{Leaderboard: "grayscale", GPUs: []string{"H100", "B200"}}},
		{name: "same leaderboard twice", src: "#!POPCORN leaderboard a\n#!POPCORN leaderboard a\n", want: Directives{Leaderboard: "a"}},
		{name: "no value", src: "x = 1\n#!POPCORN leaderboard\n", wantErr: "line 2"},
		{name: "unknown key", src: "#!POPCORN leaderbord vectoradd\n", wantErr: `unknown #!POPCORN key "leaderbord"`},
		{name: "glued", src: "#!POPCORNleaderboard a\n", wantErr: "want #!POPCORN KEY VALUE"},
		{name: "two leaderboards", src: "#!POPCORN leaderboard a\n#!POPCORN leaderboard b\n", wantErr: "a second"},
		{name: "two names", src: "#!POPCORN leaderboard a b\n", wantErr: "takes one name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDirectives([]byte(tt.src))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseDirectives(%q) error = %v, want one containing %q", tt.src, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseDirectives(%q): %v", tt.src, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseDirectives(%q) (-want +got):\n%s", tt.src, diff)
			}
		})
	}
}

func FuzzParseDirectives(f *testing.F) {
	f.Add([]byte("#!POPCORN leaderboard vectoradd\n#!POPCORN gpu H200\n"))
	f.Add([]byte("//!POPCORN gpus a,b\n"))
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := ParseDirectives(src)
		if err != nil {
			return
		}
		if strings.ContainsAny(d.Leaderboard, " \t\n,") {
			t.Errorf("leaderboard %q has a separator in it", d.Leaderboard)
		}
		for _, g := range d.GPUs {
			if g == "" || strings.ContainsAny(g, " \t\n,") {
				t.Errorf("gpu %q is empty or has a separator", g)
			}
		}
	})
}
