package problems

import "testing"

func TestCapWriter(t *testing.T) {
	t.Parallel()
	w := NewCapWriter(5)
	for _, s := range []string{"abc", "defg", "hi"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Errorf("Write(%q) = %d, %v; want all of it taken", s, n, err)
		}
	}
	if string(w.Bytes()) != "abcde" || w.Dropped() != 4 {
		t.Errorf("kept %q, dropped %d; want abcde and 4", w.Bytes(), w.Dropped())
	}
}
