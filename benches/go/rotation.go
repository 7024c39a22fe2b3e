package main

// The anchor for pooled rotation: client-go's certificate rotation. A rest.Config
// whose client certificate comes from files (CertFile, KeyFile: a Secret mounted as
// a volume) gets from client-go a transport that re-reads the files (at most once a
// second, transport.cachingCertificateLoader), checks them every
// transport.CertCallbackRefreshDuration (transport/cert_rotation.go,
// dynamicClientCert) and, when the certificate changed, closes every connection it
// dialled (connrotation.Dialer.CloseAll), so that the next request opens a new
// connection presenting the new certificate. That is the one Go client that follows
// a rotation on a kept-alive connection; what the legacy package's callers build
// (a new http.Transport per reconcile) never needs to, and a long-lived
// http.Transport of theirs never does.
//
// go/pooled-rotation/<case>, one rotation per operation: the mounted files are
// swapped to the case's other identity (as the kubelet does: a new directory and one
// rename of the ..data symlink, so the certificate and key change together), the
// operation waits until client-go closed its kept-alive connection (the rotation
// noticed: the time it took is the answer's noticed_ns), then times the first request
// after it, a GET to the HTTPS server named "https" (a new connection and a full
// handshake), checked to have presented the new certificate (the server answers the
// hex of the client's leaf certificate).

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// rotationPoll is how often client-go's rotation controller checks the files here
// (transport.CertCallbackRefreshDuration: 5 minutes by default, a variable "exposed so
// that integration tests can crank up the reload speed"). With the default, a
// rotation is followed up to 5 minutes late; what is measured is what follows.
const rotationPoll = 50 * time.Millisecond

// settle lets the http.Transport drop the connection client-go closed before the
// timed request (its read loop removes it from the idle pool on the read error; a
// request racing that would be retried once on a new connection).
const settle = 2 * time.Millisecond

// rotating is one case's client-go client over a mounted-Secret-like directory.
type rotating struct {
	dir      string
	client   *http.Client
	url      string
	closed   chan struct{}
	versions [2]identityVersion
	current  int
}

type identityVersion struct {
	cert, key []byte
	leaf      string // hex of the leaf's DER, as the server answers it
}

var rotations = map[string]*rotating{}

// countingConn tells the rotation it was closed (client-go's CloseAll closes it).
type countingConn struct {
	net.Conn
	closed chan struct{}
}

func (c *countingConn) Close() error {
	select {
	case c.closed <- struct{}{}:
	default:
	}
	return c.Conn.Close()
}

// mount writes version v as the kubelet writes a Secret volume: a new directory, then
// the ..data symlink swapped in one rename; tls.crt and tls.key point through it.
func (r *rotating) mount(v int) {
	version := filepath.Join(r.dir, fmt.Sprintf("..v%d-%d", v, time.Now().UnixNano()))
	if err := os.Mkdir(version, 0o700); err != nil {
		fail("rotation: %v", err)
	}
	for name, data := range map[string][]byte{"tls.crt": r.versions[v].cert, "tls.key": r.versions[v].key} {
		if err := os.WriteFile(filepath.Join(version, name), data, 0o600); err != nil {
			fail("rotation: %v", err)
		}
	}
	link := filepath.Join(r.dir, "..data.tmp")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Base(version), link); err != nil {
		fail("rotation: %v", err)
	}
	if err := os.Rename(link, filepath.Join(r.dir, "..data")); err != nil {
		fail("rotation: %v", err)
	}
	r.current = v
}

// newRotating sets up the case's client: version 0 mounted, the client-go HTTP
// client built from a rest.Config naming the files, one request made (the
// connection every later rotation closes).
func newRotating(name string) *rotating {
	addr, ok := peers["https"]
	if !ok {
		fail("go/pooled-rotation/%s: no peer named https", name)
	}
	dir, err := os.MkdirTemp("", "legacy-rotation-")
	if err != nil {
		fail("rotation: %v", err)
	}
	r := &rotating{dir: dir, url: "https://" + addr + "/whoami", closed: make(chan struct{}, 1)}
	for i, suffix := range []string{"", ".b"} {
		cert, key := read(name+suffix+".crt"), read(name+suffix+".key")
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			fail("%s%s: %v", name, suffix, err)
		}
		r.versions[i] = identityVersion{cert: cert, key: key, leaf: hex.EncodeToString(pair.Certificate[0])}
	}
	r.mount(0)
	for _, file := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", file), filepath.Join(dir, file)); err != nil {
			fail("rotation: %v", err)
		}
	}
	transport.CertCallbackRefreshDuration = rotationPoll
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	config := &rest.Config{
		Host: "https://" + addr,
		TLSClientConfig: rest.TLSClientConfig{
			CertFile: filepath.Join(dir, "tls.crt"),
			KeyFile:  filepath.Join(dir, "tls.key"),
			CAFile:   filepath.Join(*materialDir, "server-ca.crt"),
		},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, address)
			if err != nil {
				return nil, err
			}
			return &countingConn{Conn: conn, closed: r.closed}, nil
		},
	}
	r.client, err = rest.HTTPClientFor(config)
	if err != nil {
		fail("rotation: client-go HTTP client: %v", err)
	}
	r.request()
	return r
}

// request is one GET; it fails unless the server saw the current version's leaf.
func (r *rotating) request() {
	resp, err := r.client.Get(r.url)
	if err != nil {
		fail("rotation: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		fail("rotation: status %d: %v", resp.StatusCode, err)
	}
	if string(body) != r.versions[r.current].leaf {
		fail("rotation: the request did not present the rotated certificate")
	}
}

// rotate is one rotation: the files swapped, the wait until client-go closed the
// kept-alive connection, then the first request after it, timed. Returns the wall
// and CPU nanoseconds of that request and how long the rotation took to be noticed.
func (r *rotating) rotate() (wall, cpu, noticed time.Duration) {
	select {
	case <-r.closed:
	default:
	}
	start := time.Now()
	r.mount(1 - r.current)
	select {
	case <-r.closed:
	case <-time.After(30 * time.Second):
		fail("rotation: client-go did not close its connection within 30 s of a rotation")
	}
	noticed = time.Since(start)
	time.Sleep(settle)
	cpuStart, begin := cpuNow(), time.Now()
	r.request()
	return time.Since(begin), time.Duration(cpuNow() - cpuStart), noticed
}

// measureRotation answers n rotations of the case (at least one): the mean wall and
// CPU time of the first request after each, and the mean time to notice.
func measureRotation(name string, n int) {
	r, ok := rotations[name]
	if !ok {
		r = newRotating(name)
		rotations[name] = r
	}
	if n <= 0 {
		n = 1
	}
	var wall, cpu, noticed time.Duration
	for i := 0; i < n; i++ {
		w, c, t := r.rotate()
		wall, cpu, noticed = wall+w, cpu+c, noticed+t
	}
	answer(map[string]any{
		"ns":         float64(wall.Nanoseconds()) / float64(n),
		"cpu_ns":     float64(cpu.Nanoseconds()) / float64(n),
		"noticed_ns": float64(noticed.Nanoseconds()) / float64(n),
		"n":          n,
	})
}
