package appliance

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"kernelbox/appliance/api"
)

// TestMarkTies: an entry whose interval (1.96 standard errors, at least
// the floor's share of its score) reaches the one above it is a tie with
// it; a clear gap is not.
func TestMarkTies(t *testing.T) {
	t.Parallel()
	rows := []api.RankRow{
		{Rank: 1, Score: 100e-6, ScoreErr: 1e-6}, // ±1.96 µs
		{Rank: 2, Score: 102e-6, ScoreErr: 0},    // floor ±1.02 µs: 100.98 <= 101.96, a tie
		{Rank: 3, Score: 110e-6, ScoreErr: 0},    // 108.9 > 103.02: ranked by speed
		{Rank: 4, Score: 110e-6, ScoreErr: 0},    // an equal score is always a tie
		{Rank: 5, Score: 200e-6, ScoreErr: 20e-6},
		{Rank: 6, Score: 260e-6, ScoreErr: 1e-6}, // 257.4 > 239.2
	}
	markTies(rows, 0.01)
	var ties []bool
	for _, r := range rows {
		ties = append(ties, r.Tie)
	}
	if diff := cmp.Diff([]bool{false, true, false, true, false, false}, ties); diff != "" {
		t.Errorf("ties (-want +got):\n%s", diff)
	}
	if got, want := rows[0].Interval, 1.96e-6; got < want*0.999 || got > want*1.001 {
		t.Errorf("interval of a row with an error = %g, want %g", got, want)
	}
	if got, want := rows[2].Interval, 1.1e-6; got < want*0.999 || got > want*1.001 {
		t.Errorf("interval at the floor = %g, want %g", got, want)
	}
	none := []api.RankRow{{Score: 1}, {Score: 1.001}}
	markTies(none, 0)
	if none[1].Tie {
		t.Errorf("with no floor and no errors, distinct scores tie: %+v", none)
	}
}
