package upstream

import (
	"net/http"
	"net/url"
	"strings"
)

// do sends a raw call's POST as rc.hc.Do would. Client.Do copies every
// request's headers in case the request is redirected (3% of the
// gateway's CPU per call at 64 connections, in a profile), so the POST goes
// to the client's transport itself when nothing else of Client.Do applies
// (no cookie jar, no client timeout, a rewindable body, no user info in
// the URL, which Client.Do sends as basic auth). A redirect
// response is then followed by Client.Do, with the body rewound; errors are
// wrapped in *url.Error as Client.Do wraps them.
func (rc *rawConn) do(req *http.Request) (*http.Response, error) {
	hc := rc.hc
	if hc.Jar != nil || hc.Timeout != 0 || hc.Transport == nil || req.GetBody == nil || req.URL.User != nil {
		return hc.Do(req)
	}
	resp, err := hc.Transport.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(req.Method), URL: stripPassword(req.URL), Err: err}
	}
	if !isRedirect(resp.StatusCode) {
		return resp, nil
	}
	resp.Body.Close()
	body, err := req.GetBody()
	if err != nil {
		return nil, &url.Error{Op: urlErrorOp(req.Method), URL: stripPassword(req.URL), Err: err}
	}
	req.Body = body
	return hc.Do(req)
}

// isRedirect reports the statuses Client.Do follows.
func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// urlErrorOp is the Op of Client.Do's *url.Error: "Post" for POST.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// stripPassword is the URL in Client.Do's errors, a password masked.
func stripPassword(u *url.URL) string {
	if _, set := u.User.Password(); set {
		return strings.Replace(u.String(), u.User.String()+"@", u.User.Username()+":***@", 1)
	}
	return u.String()
}
