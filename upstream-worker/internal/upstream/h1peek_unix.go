//go:build unix

package upstream

import "syscall"

// h1Supported: the idle-connection check below needs MSG_PEEK.
const h1Supported = true

// alive reports whether an idle connection is still open and silent: the
// server has neither closed it nor sent anything unasked. One
// non-blocking peek (MSG_PEEK|MSG_DONTWAIT); without a raw socket, true.
func (pc *h1Conn) alive() bool {
	if pc.br.Buffered() > 0 {
		return false
	}
	sc, ok := pc.c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	live := true
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		live = n < 0 && (err == syscall.EAGAIN || err == syscall.EWOULDBLOCK)
		return true
	})
	return err == nil && live
}
