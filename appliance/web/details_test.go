package web

import (
	"strings"
	"testing"

	"kernelbox/gpu"
)

func TestDrawSeries(t *testing.T) {
	t.Parallel()
	if got := drawSeries([]gpu.SeriesPoint{{Ms: 0, SMClockMHz: 1980, TempC: 40}}); got != "" {
		t.Errorf("one reading drew %q, want nothing", got)
	}
	pts := []gpu.SeriesPoint{{Ms: 0, SMClockMHz: 1980, TempC: 40}, {Ms: 500, SMClockMHz: 1500, TempC: 55}, {Ms: 1000, SMClockMHz: 1500, TempC: 60}}
	svg := string(drawSeries(pts))
	if strings.Count(svg, "<polyline") != 2 || !strings.Contains(svg, "SM clock (MHz)") || !strings.Contains(svg, ">1.0 s<") {
		t.Errorf("drawSeries = %s", svg)
	}
	// The highest clock is drawn at the top of its band, the lowest at the bottom.
	if !strings.Contains(svg, `points="70.0,18.0 `) {
		t.Errorf("the first point (1980 MHz, the highest) is not at the top-left: %s", svg)
	}
}
