package fleet

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// The HTTP round trippers under the Prometheus client: authentication and
// a bound on every response body.

type limitKey struct{}

// withLimit sets the response limit of the requests made under ctx.
func withLimit(ctx context.Context, n int64) context.Context {
	return context.WithValue(ctx, limitKey{}, n)
}

// authTransport adds the bearer token or basic credentials to each request.
type authTransport struct {
	next              http.RoundTripper
	token, user, pass string
}

func (a authTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if a.token != "" {
		r.Header.Set("Authorization", "Bearer "+a.token)
	} else {
		r.SetBasicAuth(a.user, a.pass)
	}
	return a.next.RoundTrip(r)
}

// ErrResponseTooLarge is returned when a response passes MaxResponse.
var ErrResponseTooLarge = errors.New("response too large")

// limitTransport cuts every response body at max bytes: a server (or
// something posing as one) streaming a gigabyte must not take it all.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (l limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	limit := l.max
	if n, ok := r.Context().Value(limitKey{}).(int64); ok && n > 0 {
		limit = n
	}
	resp.Body = &limitedBody{rc: resp.Body, left: limit}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n > 0 {
			return 0, ErrResponseTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
