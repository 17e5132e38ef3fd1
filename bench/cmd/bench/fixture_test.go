package main

import "testing"

func TestFixtureProcs(t *testing.T) {
	for _, tc := range []struct {
		serial bool
		env    string
		want   int
	}{
		{false, "", 0},
		{true, "", 1},
		{true, "4", 0},
		{false, "2", 0},
	} {
		if got := fixtureProcs(tc.serial, tc.env); got != tc.want {
			t.Errorf("fixtureProcs(%v, %q) = %d, want %d", tc.serial, tc.env, got, tc.want)
		}
	}
}
