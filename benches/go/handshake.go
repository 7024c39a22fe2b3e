package main

// The handshake operations and the servers: this process's own crypto/tls server
// (the whole-stack rows), the legacy client's configurations, and the crypto/tls and
// HTTPS servers of -mode server.

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func pool(pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		fail("no certificate in CA bundle")
	}
	return p
}

// offeredFirst is the key exchange group the last client hello offered first (what
// each configuration is checked against before it is measured).
var offeredFirst atomic.Uint32

// groupName names the groups of interest by the names the report uses (the draft
// hybrid too, which Go 1.24 and later no longer offer).
func groupName(id tls.CurveID) string {
	switch id {
	case 0x6399:
		return "X25519Kyber768Draft00"
	case 0x11ec:
		return "X25519MLKEM768"
	}
	return id.String()
}

// serve accepts mTLS connections: an explicit handshake (the client certificate is
// verified in it), one byte, close.
func serve() net.Addr {
	cert, err := tls.X509KeyPair(read("server.crt"), read("server.key"))
	if err != nil {
		fail("server: %v", err)
	}
	config := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool(read("client-ca.crt")),
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if len(hello.SupportedCurves) > 0 {
				offeredFirst.Store(uint32(hello.SupportedCurves[0]))
			}
			return nil, nil
		},
	}
	return listen(config)
}

// listen accepts mTLS connections with config on a loopback port: an explicit
// handshake (the client certificate is verified in it), one byte, close.
func listen(config *tls.Config) net.Addr {
	listener, err := tls.Listen("tcp", "127.0.0.1:0", config)
	if err != nil {
		fail("listen: %v", err)
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				continue
			}
			go func(conn *tls.Conn) {
				defer conn.Close()
				if err := conn.Handshake(); err == nil {
					_, _ = conn.Write([]byte("k"))
				}
			}(conn.(*tls.Conn))
		}
	}()
	return listener.Addr()
}

func handshake(config *tls.Config, addr string) {
	conn, err := tls.Dial("tcp", addr, config)
	if err != nil {
		fail("handshake: %v", err)
	}
	defer conn.Close()
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != 'k' {
		fail("handshake: no byte from the server: %v", err)
	}
}

// round runs `clients` goroutines, each dialling `batch` handshakes in a loop, and
// returns the mean nanoseconds per handshake (the inverse of handshakes per second).
func round(config *tls.Config, addr string, clients, batch int) float64 {
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < batch; i++ {
				handshake(config, addr)
			}
		}()
	}
	wg.Wait()
	return float64(time.Since(start)) / float64(batch*clients)
}

var (
	ownAddr string
	ownOnce sync.Once
)

// ownServer is this process's crypto/tls server (the whole-stack rows).
func ownServer() string {
	ownOnce.Do(func() { ownAddr = serve().String() })
	return ownAddr
}

// clientConfig is the legacy client's configuration: static (a fixed certificate),
// reload (tls.X509KeyPair on every handshake, Go's default key exchange) or
// reload-x25519 (the same, X25519 only).
func clientConfig(mode, key string) *tls.Config {
	certPEM, keyPEM := read(key+"-pkcs8.crt"), read(key+"-pkcs8.key")
	config := &tls.Config{
		MinVersion: tls.VersionTLS13,
		RootCAs:    pool(read("server-ca.crt")),
		ServerName: "127.0.0.1",
	}
	switch mode {
	case "static":
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			fail("%s: %v", key, err)
		}
		config.Certificates = []tls.Certificate{cert}
	case "reload", "reload-x25519":
		// The legacy client: the Secret's bytes from the informer cache, parsed
		// again on every handshake.
		config.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			return &pair, err
		}
		if mode == "reload-x25519" {
			config.CurvePreferences = []tls.CurveID{tls.X25519}
		}
	default:
		fail("unknown client mode %s", mode)
	}
	return config
}

// group answers which key exchange group operation id's client offers first.
func group(id string) {
	parts := strings.Split(id, "/")
	if len(parts) != 5 || parts[1] != "handshake" {
		fail("group: not a handshake operation: %s", id)
	}
	handshake(clientConfig(parts[2], parts[3]), ownServer())
	answer(map[string]any{"group": groupName(tls.CurveID(offeredFirst.Load()))})
}

// serveHTTPS serves GET / with "ok" over mTLS (the reconcile-request rows' peer) and
// GET /whoami with the hex of the client's leaf certificate (the pooled-rotation rows).
func serveHTTPS() net.Addr {
	cert, err := tls.X509KeyPair(read("server.crt"), read("server.key"))
	if err != nil {
		fail("server: %v", err)
	}
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool(read("client-ca.crt")),
		NextProtos:   []string{"http/1.1"},
	})
	if err != nil {
		fail("listen: %v", err)
	}
	server := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/whoami" && r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
				// The client's leaf certificate (DER, hex): which identity it presented.
				_, _ = w.Write([]byte(hex.EncodeToString(r.TLS.PeerCertificates[0].Raw)))
				return
			}
			_, _ = w.Write([]byte("ok"))
		}),
		ErrorLog: nil,
	}
	go func() { _ = server.Serve(listener) }()
	return listener.Addr()
}
