package fleet

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ServerOptions bound what one client can hold of an exporter that runs
// for days: how long a request may take to arrive and be answered, how
// long a keep-alive connection may sit idle, and how many connections may
// be open at once.
type ServerOptions struct {
	// MaxConns caps open connections. At the cap a new connection evicts
	// the longest-idle keep-alive one (or one that has sent nothing for
	// a second); with none to evict it is closed at once, so a flood of
	// idle clients never starves a scrape.
	MaxConns int
	// ReadHeaderTimeout, ReadTimeout and WriteTimeout bound one request
	// (slowloris, slow readers); IdleTimeout closes a keep-alive
	// connection between requests.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
}

// DefaultServerOptions are serve's defaults (documented in the README).
var DefaultServerOptions = ServerOptions{MaxConns: 256, ReadHeaderTimeout: 10 * time.Second,
	ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}

// NewServer returns an http.Server with opt's timeouts and the listener
// wrapper that enforces MaxConns; serve with srv.Serve(wrap(ln)).
func NewServer(h http.Handler, opt ServerOptions) (srv *http.Server, wrap func(net.Listener) net.Listener) {
	lim := &connLimit{max: max(1, opt.MaxConns), conns: map[net.Conn]*connInfo{}}
	srv = &http.Server{Handler: h, ReadHeaderTimeout: opt.ReadHeaderTimeout, ReadTimeout: opt.ReadTimeout,
		WriteTimeout: opt.WriteTimeout, IdleTimeout: opt.IdleTimeout, MaxHeaderBytes: 64 << 10,
		ConnState: lim.state}
	return srv, func(ln net.Listener) net.Listener { lim.Listener = ln; return lim }
}

// connLimit is a listener that keeps at most max connections open.
type connLimit struct {
	net.Listener
	max     int
	mu      sync.Mutex
	conns   map[net.Conn]*connInfo
	evicted atomic.Int64 // idle connections closed to make room
	refused atomic.Int64 // new connections closed: nothing to evict
}

type connInfo struct {
	state http.ConnState
	since time.Time
}

// staleNew is how long a connection may stay open without sending a
// request before a newcomer may evict it.
const staleNew = time.Second

func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		now := time.Now()
		l.mu.Lock()
		if len(l.conns) >= l.max {
			victim := l.victim(now)
			if victim == nil {
				l.mu.Unlock()
				l.refused.Add(1)
				c.Close()
				continue
			}
			delete(l.conns, victim)
			l.evicted.Add(1)
			victim.Close()
		}
		l.conns[c] = &connInfo{state: http.StateNew, since: now}
		l.mu.Unlock()
		return c, nil
	}
}

// victim is the connection to close for a newcomer: the longest idle
// keep-alive one, else the oldest that has sent nothing for staleNew.
// Called with mu held.
func (l *connLimit) victim(now time.Time) net.Conn {
	var best net.Conn
	var bestInfo *connInfo
	for c, in := range l.conns {
		switch {
		case in.state == http.StateIdle:
			if bestInfo == nil || bestInfo.state != http.StateIdle || in.since.Before(bestInfo.since) {
				best, bestInfo = c, in
			}
		case in.state == http.StateNew && now.Sub(in.since) >= staleNew:
			if bestInfo == nil || (bestInfo.state == http.StateNew && in.since.Before(bestInfo.since)) {
				best, bestInfo = c, in
			}
		}
	}
	return best
}

// state is the server's ConnState hook.
func (l *connLimit) state(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	default:
		if in := l.conns[c]; in != nil {
			in.state, in.since = s, time.Now()
		}
	}
}

// open is the number of connections held (tests).
func (l *connLimit) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}
