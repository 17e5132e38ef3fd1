package upstream

import (
	"context"
	"sync"
)

// Closer closes upstream sessions in the background and tracks the
// goroutines that do it, so a shutdown can wait for them. Every session's
// lifetime context derives from [Closer.Life]: once [Closer.Wait]'s ctx
// ends, the lifetimes are cancelled, which aborts the sessions' HTTP
// requests and kills their processes, so the closers finish promptly.
//
// One Closer is shared by all upstreams of a worker. Safe for concurrent
// use.
type Closer struct {
	life context.Context
	kill context.CancelFunc
	wg   sync.WaitGroup

	mu      sync.Mutex
	waiting bool // guarded by mu: Wait has started
}

// NewCloser returns a Closer.
func NewCloser() *Closer {
	life, kill := context.WithCancel(context.Background())
	return &Closer{life: life, kill: kill}
}

// Life is the parent of every session's lifetime context.
func (c *Closer) Life() context.Context { return c.life }

// Go runs f in a tracked goroutine. After Wait has started, f still runs,
// untracked (the lifetimes are cancelled by then, so it ends quickly).
func (c *Closer) Go(f func()) {
	c.mu.Lock()
	if c.waiting {
		c.mu.Unlock()
		go f()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// close closes s in the background, then ends its lifetime.
func (c *Closer) close(s *session) {
	if s == nil {
		return
	}
	c.Go(func() {
		_ = s.cs.Close()
		s.end()
	})
}

// Wait waits for the tracked goroutines. When ctx ends first it cancels
// every session lifetime and waits for them to finish. Call it once, after
// the upstreams have stopped.
func (c *Closer) Wait(ctx context.Context) {
	c.mu.Lock()
	c.waiting = true
	c.mu.Unlock()
	done := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
	c.kill()
	<-done
}
