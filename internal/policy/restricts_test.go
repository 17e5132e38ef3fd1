package policy

import "testing"

func TestPolicyRestricts(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		kind Kind
		want bool
	}{
		{"default allow, no rules", Spec{AllUpstreams: true, Default: Allow}, KindResources, false},
		{"default deny", Spec{AllUpstreams: true}, KindResources, true},
		{"a rule of the kind", Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{{Effect: Deny, Kind: KindResources, Pattern: "x://*"}}}, KindResources, true},
		{"a rule of every kind", Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{{Effect: Allow, Pattern: "*"}}}, KindResources, true},
		{"a rule of another kind", Spec{AllUpstreams: true, Default: Allow, Rules: []Rule{{Effect: Deny, Kind: KindTools, Pattern: "*"}}}, KindResources, false},
		{"unknown kind", Spec{AllUpstreams: true, Default: Allow}, Kind("nope"), true},
	} {
		p, err := Compile(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Restricts(tc.kind); got != tc.want {
			t.Errorf("%s: Restricts(%s) = %v, want %v", tc.name, tc.kind, got, tc.want)
		}
	}
}
