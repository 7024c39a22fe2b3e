// Command legacy measures the legacy Go way of doing what svc-tls does, on the key
// material that the Rust benchmarks use (the same PEM bytes, written by them to the
// directory given with -material). It runs as a long-lived child of the Rust
// benchmarks, which interleave its batches with theirs round by round, so that every
// ratio between the two languages is taken from batches measured side by side:
//
//	legacy -material DIR -mode child    measures on commands read from stdin
//	legacy -material DIR -mode server   serves TLS and HTTPS until stdin closes
//
// Child commands, one per line on stdin, each answered by one JSON line on stdout:
//
//	measure <id> <n> <target-ns>
//	    runs one batch of the operation <id>: exactly n operations, or (n = 0) as many
//	    as last about target-ns (sized once per id, after a warm-up, on first use).
//	    Answer: {"ns": wall ns per operation, "cpu_ns": this process's CPU time
//	    (getrusage, user + system) per operation, "n": operations}.
//	peer <name> <host:port>
//	    names a server that the go/client/<name>/<key> operations dial.
//	cluster <url> <token> <ca-file>
//	    starts controller-runtime's cache (a Secret informer over the namespace
//	    "bench") and its cache-backed client against the API server at url (bearer
//	    token, serving CA in ca-file): the server the Rust arms read. Answered once
//	    the informer synced.
//	group <id>
//	    the key exchange group the client hello of operation <id> offers first
//	    (checked on one handshake against the in-process server).
//
// Operations:
//   - go/x509keypair/<case> (and go/rotation-x509keypair/<case>, the same operation
//     measured beside the rotation samples): tls.X509KeyPair on a Secret's tls.crt
//     and tls.key, which the Go client ran on every handshake;
//   - go/reconcile/<case>: TLSClientConfig as a controller calls it per reconcile
//     (the Get of the CA and identity Secrets through controller-runtime's
//     cache-backed client, as the Go package's New() returns it: a look-up in the
//     informer's store and a deep copy; then tls.X509KeyPair, a root pool, a
//     tls.Config and a new http.Transport in an http.Client);
//   - go/reconcile-request/<case>: the same and one GET through the new client to the
//     peer named "https" (a new connection and a full mTLS handshake, as a new
//     Transport makes), the body read and closed; the Transport's idle connection is
//     closed at the end so that thousands of reconciles do not hold thousands of
//     sockets;
//   - go/ps512-sign/<rsaN>, go/ps512-verify/<rsaN>: go-jose PS512 signing and
//     verification (parse + verify) of the X-Principal token;
//   - go/handshake/{static,reload,reload-x25519}/<key>/<clients>: loopback TLS 1.3
//     mTLS handshakes against this process's own crypto/tls server (the whole stack:
//     client and server), with a fixed client certificate, or with
//     GetClientCertificate calling tls.X509KeyPair on every handshake, with Go's
//     default key exchange (CurvePreferences unset: Go 1.26, like every Go since
//     1.24, offers the X25519MLKEM768 hybrid first), or with
//     classical X25519 only (CurvePreferences: []tls.CurveID{tls.X25519});
//   - go/client/<peer>/<key>: the legacy client alone (reload, X25519 only, one
//     client) dialling the server named <peer>, which runs in another process (a
//     crypto/tls server from -mode server, or the Rust benchmark's rustls server):
//     the CPU time of this process per handshake is the client's cost.
//
// The handshake loop is a plain Go one: each client is one goroutine dialling in a
// loop (a new TCP connection and a full handshake each time, reading the server's
// byte, closing); the server handshakes explicitly, writes one byte and closes.
package main

import (
	"bufio"
	"context"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

var (
	materialDir = flag.String("material", "", "directory with the PEM files written by the Rust benchmarks")
	mode        = flag.String("mode", "child", "child: measure on commands from stdin; server: serve until stdin closes")
	out         = json.NewEncoder(os.Stdout)
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "legacy: "+format+"\n", args...)
	os.Exit(1)
}

func read(name string) []byte {
	data, err := os.ReadFile(filepath.Join(*materialDir, name))
	if err != nil {
		fail("%v", err)
	}
	return data
}

func answer(v any) {
	if err := out.Encode(v); err != nil {
		fail("%v", err)
	}
}

// cpuNow is this process's CPU time (user + system) in nanoseconds.
func cpuNow() int64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		fail("getrusage: %v", err)
	}
	return usage.Utime.Nano() + usage.Stime.Nano()
}

// An operation run n times (split across its clients for handshakes).
type operation func(n int)

func repeat(f func()) operation {
	return func(n int) {
		for i := 0; i < n; i++ {
			f()
		}
	}
}

var (
	operations = map[string]operation{}
	batches    = map[string]int{}
	peers      = map[string]string{}
)

// size warms up and sizes a batch so that it lasts about target.
func size(op operation, target time.Duration) int {
	batch := 1
	for {
		start := time.Now()
		op(batch)
		elapsed := time.Since(start)
		if elapsed >= target/4 || batch >= 1<<20 {
			per := float64(elapsed) / float64(batch)
			return int(float64(target)/per) + 1
		}
		batch *= 2
	}
}

func measure(id string, n int, target time.Duration) {
	op, ok := operations[id]
	if !ok {
		op = build(id)
		operations[id] = op
	}
	if n <= 0 {
		if batches[id] == 0 {
			batches[id] = size(op, target)
		}
		n = batches[id]
	}
	cpu, start := cpuNow(), time.Now()
	op(n)
	wall, used := time.Since(start), cpuNow()-cpu
	answer(map[string]any{
		"ns":     float64(wall.Nanoseconds()) / float64(n),
		"cpu_ns": float64(used) / float64(n),
		"n":      n,
	})
}

// build makes the operation named by id.
func build(id string) operation {
	parts := strings.Split(id, "/")
	if len(parts) < 3 || parts[0] != "go" {
		fail("unknown operation %s", id)
	}
	switch parts[1] {
	case "x509keypair", "rotation-x509keypair":
		return keyPair(parts[2])
	case "reconcile":
		return repeat(reconciler(parts[2], ""))
	case "reconcile-request":
		addr, ok := peers["https"]
		if !ok {
			fail("%s: no peer named https", id)
		}
		return repeat(reconciler(parts[2], "https://"+addr+"/"))
	case "ps512-sign", "ps512-verify":
		sign, verify := principal(parts[2])
		if parts[1] == "ps512-sign" {
			return repeat(func() { sign() })
		}
		return repeat(verify)
	case "handshake":
		if len(parts) != 5 {
			fail("unknown operation %s", id)
		}
		clients, err := strconv.Atoi(parts[4])
		if err != nil || clients < 1 {
			fail("%s: bad client count", id)
		}
		config := clientConfig(parts[2], parts[3])
		addr := ownServer()
		return func(n int) { round(config, addr, clients, (n+clients-1)/clients) }
	case "client":
		addr, ok := peers[parts[2]]
		if !ok {
			fail("%s: no peer named %s", id, parts[2])
		}
		config := clientConfig("reload-x25519", parts[3])
		return func(n int) { round(config, addr, 1, n) }
	}
	fail("unknown operation %s", id)
	return nil
}

func keyPair(name string) operation {
	certPEM, keyPEM := read(name+".crt"), read(name+".key")
	return repeat(func() {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			fail("%s: %v", name, err)
		}
	})
}

// sinkClient keeps each reconcile's client alive until the next, as a reconcile
// would use it.
var sinkClient *http.Client

// The namespace of the benchmarks' Secrets.
const benchNamespace = "bench"

// kube is the controller-runtime client the Go package's New() returns: reads served
// from the informer cache (cache.New, a Secret informer over the bench namespace,
// started and synced once), set by the "cluster" command.
var kube client.Client

// connect starts the cache-backed client against the API server at url (the same
// server the Rust arms read, with its bearer token and its CA in caFile) and waits
// for the Secret informer to sync.
func connect(url, token, caFile string) {
	ctrllog.SetLogger(logr.Discard())
	config := &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile},
	}
	ctx := context.Background()
	informers, err := cache.New(config, cache.Options{
		Scheme:            clientgoscheme.Scheme,
		DefaultNamespaces: map[string]cache.Config{benchNamespace: {}},
	})
	if err != nil {
		fail("cache: %v", err)
	}
	go func() {
		if err := informers.Start(ctx); err != nil {
			fail("cache: %v", err)
		}
	}()
	if _, err := informers.GetInformer(ctx, &corev1.Secret{}); err != nil {
		fail("cache: Secret informer: %v", err)
	}
	if !informers.WaitForCacheSync(ctx) {
		fail("cache: not synced")
	}
	kube, err = client.New(config, client.Options{
		Scheme: clientgoscheme.Scheme,
		Cache:  &client.CacheOptions{Reader: informers},
	})
	if err != nil {
		fail("client: %v", err)
	}
}

// cachedSecret is a cached Get of the Secret bench/name (a look-up in the informer's
// store and a deep copy of the object, as controller-runtime's cache reader does).
func cachedSecret(name string) map[string][]byte {
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: benchNamespace, Name: name}
	if err := kube.Get(context.Background(), key, &secret); err != nil {
		fail("get Secret %s: %v", key, err)
	}
	return secret.Data
}

// waitForSecret waits until the informer has seen the Secret bench/name (the Rust
// benchmark creates each case's Secret just before measuring it).
func waitForSecret(name string) {
	key := types.NamespacedName{Namespace: benchNamespace, Name: name}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var secret corev1.Secret
		err := kube.Get(context.Background(), key, &secret)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			fail("Secret %s not in the cache after 30 s: %v", key, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reconciler is one reconcile's TLSClientConfig and HTTP client, and one request
// through it when url is set. The CA and identity Secrets are read through the
// cache-backed client, from the API server named by the "cluster" command.
func reconciler(name, url string) func() {
	if kube == nil {
		fail("reconcile %s: no API server (send the cluster command first)", name)
	}
	identity := "identity-" + name
	waitForSecret("peer-ca")
	waitForSecret(identity)
	return func() {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cachedSecret("peer-ca")["tls.crt"]) {
			fail("%s: no CA certificate", name)
		}
		secret := cachedSecret(identity)
		certificate, err := tls.X509KeyPair(secret["tls.crt"], secret["tls.key"])
		if err != nil {
			fail("%s: %v", name, err)
		}
		config := &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{certificate},
			MinVersion:   tls.VersionTLS13,
		}
		transport := &http.Transport{TLSClientConfig: config}
		sinkClient = &http.Client{Transport: transport}
		if url == "" {
			return
		}
		resp, err := sinkClient.Get(url)
		if err != nil {
			fail("%s: %v", name, err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			fail("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fail("%s: status %d", name, resp.StatusCode)
		}
		transport.CloseIdleConnections()
	}
}

func principal(bits string) (func() string, func()) {
	payload := []byte(`{"organizationId":"9a6b1c0e-org","projectId":"4f2d7e11-project","actor":"alice@example.com"}`)
	pair, err := tls.X509KeyPair(read(bits+"-pkcs8.crt"), read(bits+"-pkcs8.key"))
	if err != nil {
		fail("%s: %v", bits, err)
	}
	key, ok := pair.PrivateKey.(*rsa.PrivateKey)
	if !ok {
		fail("%s: not an RSA key", bits)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.PS512, Key: key}, nil)
	if err != nil {
		fail("%s: %v", bits, err)
	}
	sign := func() string {
		jws, err := signer.Sign(payload)
		if err != nil {
			fail("%s: %v", bits, err)
		}
		token, err := jws.CompactSerialize()
		if err != nil {
			fail("%s: %v", bits, err)
		}
		return token
	}
	token := sign()
	public := key.Public().(*rsa.PublicKey)
	verify := func() {
		jws, err := jose.ParseSigned(token, []jose.SignatureAlgorithm{jose.PS512})
		if err != nil {
			fail("%s: %v", bits, err)
		}
		var claims map[string]any
		got, err := jws.Verify(public)
		if err != nil {
			fail("%s: %v", bits, err)
		}
		if err := json.Unmarshal(got, &claims); err != nil {
			fail("%s: %v", bits, err)
		}
	}
	verify()
	return sign, verify
}

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

// serveHTTPS serves GET / with "ok" over mTLS (the reconcile-request rows' peer).
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
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}),
		ErrorLog: nil,
	}
	go func() { _ = server.Serve(listener) }()
	return listener.Addr()
}

func child() {
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 0 {
			continue
		}
		switch {
		case fields[0] == "measure" && len(fields) == 4:
			n, err1 := strconv.Atoi(fields[2])
			target, err2 := strconv.ParseInt(fields[3], 10, 64)
			if err1 != nil || err2 != nil {
				fail("bad command %q", scanner.Text())
			}
			measure(fields[1], n, time.Duration(target))
		case fields[0] == "cluster" && len(fields) == 4:
			connect(fields[1], fields[2], fields[3])
			answer(map[string]any{"ok": true})
		case fields[0] == "peer" && len(fields) == 3:
			peers[fields[1]] = fields[2]
			answer(map[string]any{"ok": true})
		case fields[0] == "group" && len(fields) == 2:
			group(fields[1])
		default:
			fail("bad command %q", scanner.Text())
		}
	}
}

// notedModules are the modules whose versions the program names when it starts (the
// bench table's header names the same, read by xtask with `go version -m`).
var notedModules = map[string]bool{
	"github.com/go-jose/go-jose/v4":  true,
	"sigs.k8s.io/controller-runtime": true,
	"k8s.io/client-go":               true,
	"github.com/spiffe/go-spiffe/v2": true,
}

// builtWith is the Go version and the noted modules this binary was built with, from
// its own build information (what `go version -m` prints of it).
func builtWith() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return runtime.Version() + " (no build information)"
	}
	parts := []string{info.GoVersion}
	others := 0
	for _, dep := range info.Deps {
		if notedModules[dep.Path] {
			parts = append(parts, dep.Path+" "+dep.Version)
		} else {
			others++
		}
	}
	return fmt.Sprintf("%s and %d other modules", strings.Join(parts, ", "), others)
}

func main() {
	flag.Parse()
	if *materialDir == "" {
		fail("-material is required")
	}
	fmt.Fprintf(os.Stderr, "legacy: %s; GOMAXPROCS %d, mode %s\n", builtWith(), runtime.GOMAXPROCS(0), *mode)
	switch *mode {
	case "child":
		child()
	case "server":
		answer(map[string]any{"tls": serve().String(), "https": serveHTTPS().String()})
		_, _ = io.Copy(io.Discard, os.Stdin)
	default:
		fail("unknown mode %s", *mode)
	}
}
