package bus

import "strings"

// UnavailableReason is what a client is told of why an upstream is down,
// given the detail a worker keeps for operators (proto.UpstreamState.Err,
// an error's text): one of a few fixed phrases, never the detail itself,
// which names the upstream's URL, addresses, hosts, command paths and the
// gateway's internals (they stay in the worker's log and its /readyz).
func UnavailableReason(detail string) string {
	d := strings.ToLower(detail)
	for _, r := range unavailableReasons {
		for _, m := range r.match {
			if strings.Contains(d, m) {
				return r.phrase
			}
		}
	}
	return "not connected"
}

// unavailableReasons are tried in order: the first phrase with a match
// wins.
var unavailableReasons = []struct {
	match  []string
	phrase string
}{
	{[]string{"upstream stopped"}, "stopped"},
	{[]string{"no process"}, "no process running"},
	{[]string{"credentials"}, "its credentials are missing or invalid"},
	{[]string{"context canceled", "cancelled"}, "cancelled"},
	{[]string{"connection refused"}, "connection refused"},
	{[]string{"no such host", "server misbehaving"}, "host not found"},
	{[]string{"certificate", "x509", "tls:"}, "TLS handshake failed"},
	{[]string{"deadline exceeded", "timeout", "timed out"}, "timed out"},
	{[]string{"executable file not found", "no such file or directory", "permission denied"}, "command could not be started"},
	{[]string{"exit status", "process exited", "signal:"}, "process exited"},
	{[]string{"connection reset", "broken pipe", "eof", "connection closed", "session"}, "connection lost"},
	{[]string{"catalog:"}, "listing failed"},
	{[]string{"connecting"}, "connecting"},
}
