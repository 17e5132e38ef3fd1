//go:build !unix

package upstream

// h1Supported: without MSG_PEEK an idle connection cannot be checked
// before reuse, so newH1Transport keeps http.Transport.
const h1Supported = false

func (pc *h1Conn) alive() bool { return false }
