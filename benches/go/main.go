// Command legacy measures the legacy Go way of doing what svc-tls does, on the key
// material that the Rust benchmarks use (the same PEM bytes, written by them to the
// directory given with -material):
//
//   - go/x509keypair/<case>: tls.X509KeyPair on a Secret's tls.crt and tls.key, which
//     the Go client ran on every handshake;
//   - go/reconcile/<case>: TLSClientConfig as a controller calls it per reconcile
//     (the cached-client Get of the CA and identity Secrets, modelled as the map
//     look-up and deep copy that controller-runtime's cache does, tls.X509KeyPair, a
//     root pool, a tls.Config and a new http.Transport);
//   - go/ps512-sign/<rsaN>, go/ps512-verify/<rsaN>: go-jose PS512 signing and
//     verification (parse + verify) of the X-Principal token;
//   - go/handshake/{static,reload}/<key>/<clients>: loopback TLS 1.3 mTLS handshakes
//     with a fixed client certificate, or with GetClientCertificate calling
//     tls.X509KeyPair on every handshake, with Go's default key exchange
//     (CurvePreferences unset: Go 1.23 offers the X25519Kyber768Draft00 hybrid first,
//     Go 1.24 and later X25519MLKEM768);
//   - go/handshake/reload-x25519/<key>/<clients>: reload with classical X25519 only
//     (CurvePreferences: []tls.CurveID{tls.X25519}), the like-for-like counterpart of
//     our handshake/reload-x25519;
//     all three measured in alternating batches.
//
// The handshake loop is a plain Go one, the shape the Rust side uses too: each client
// is one goroutine dialling in a loop (a new TCP connection and a full handshake each
// time, reading the server's byte, closing); the server handshakes explicitly, writes
// one byte and closes.
//
// Each result is one JSON line: {"id": ..., "unit": "ns", "samples": [...]}, every
// sample the mean time of one operation over a batch. The caller (cargo xtask bench)
// computes medians and confidence intervals with the same code as for the Rust side.
package main

import (
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

type result struct {
	ID      string    `json:"id"`
	Unit    string    `json:"unit"`
	Samples []float64 `json:"samples"`
}

var (
	materialDir = flag.String("material", "", "directory with the PEM files written by the Rust benchmarks")
	quick       = flag.Bool("quick", false, "smoke run: few, short samples")
	only        = flag.String("only", "", "run only benchmarks whose id contains this")
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

func emit(id string, samples []float64) {
	if err := out.Encode(result{ID: id, Unit: "ns", Samples: samples}); err != nil {
		fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "legacy: measured %s (%d samples)\n", id, len(samples))
}

func sampling() (count int, target time.Duration) {
	if *quick {
		return 10, 2 * time.Millisecond
	}
	return 40, 25 * time.Millisecond
}

// measure times `op` in batches sized so one batch lasts about the sample target, and
// returns the mean nanoseconds per operation of each batch.
func measure(op func()) []float64 {
	count, target := sampling()
	// Warm up and size the batch.
	batch := 1
	for {
		start := time.Now()
		for i := 0; i < batch; i++ {
			op()
		}
		elapsed := time.Since(start)
		if elapsed >= target/4 || batch >= 1<<20 {
			per := float64(elapsed) / float64(batch)
			batch = int(float64(target)/per) + 1
			break
		}
		batch *= 2
	}
	samples := make([]float64, 0, count)
	for s := 0; s < count; s++ {
		start := time.Now()
		for i := 0; i < batch; i++ {
			op()
		}
		samples = append(samples, float64(time.Since(start))/float64(batch))
	}
	return samples
}

func wanted(id string) bool {
	return *only == "" || strings.Contains(id, *only)
}

func keyPairs() {
	for _, name := range strings.Fields(string(read("cases.txt"))) {
		id := "go/x509keypair/" + name
		if !wanted(id) {
			continue
		}
		certPEM, keyPEM := read(name+".crt"), read(name+".key")
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			fail("%s: %v", name, err)
		}
		emit(id, measure(func() {
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				fail("%s: %v", name, err)
			}
		}))
	}
}

// sinkClient keeps each reconcile's client alive until the next, as a reconcile
// would use it.
var sinkClient *http.Client

// reconciles measures one reconcile's TLSClientConfig and HTTP client, on the cases
// the Rust side's reconcile/<case> rows use.
func reconciles() {
	// controller-runtime's informer cache: namespace/name -> data.
	cache := map[string]map[string][]byte{
		"bench/peer-ca": {"tls.crt": read("server-ca.crt")},
	}
	// A cached Get: a map look-up and a deep copy of the object.
	get := func(key string) map[string][]byte {
		data, ok := cache[key]
		if !ok {
			fail("no Secret %s in the cache", key)
		}
		out := make(map[string][]byte, len(data))
		for k, v := range data {
			out[k] = append([]byte(nil), v...)
		}
		return out
	}
	for _, name := range []string{"p256-pkcs8", "rsa2048-pkcs8"} {
		id := "go/reconcile/" + name
		if !wanted(id) {
			continue
		}
		identity := "bench/identity-" + name
		cache[identity] = map[string][]byte{"tls.crt": read(name + ".crt"), "tls.key": read(name + ".key")}
		reconcile := func() *http.Client {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(get("bench/peer-ca")["tls.crt"]) {
				fail("%s: no CA certificate", name)
			}
			secret := get(identity)
			certificate, err := tls.X509KeyPair(secret["tls.crt"], secret["tls.key"])
			if err != nil {
				fail("%s: %v", name, err)
			}
			config := &tls.Config{
				RootCAs:      pool,
				Certificates: []tls.Certificate{certificate},
				MinVersion:   tls.VersionTLS13,
			}
			return &http.Client{Transport: &http.Transport{TLSClientConfig: config}}
		}
		sinkClient = reconcile()
		emit(id, measure(func() { sinkClient = reconcile() }))
	}
}

func principals() {
	payload := []byte(`{"organizationId":"9a6b1c0e-org","projectId":"4f2d7e11-project","actor":"alice@example.com"}`)
	for _, bits := range []string{"rsa2048", "rsa3072", "rsa4096"} {
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
		if id := "go/ps512-sign/" + bits; wanted(id) {
			emit(id, measure(func() { sign() }))
		}
		if id := "go/ps512-verify/" + bits; wanted(id) {
			emit(id, measure(verify))
		}
	}
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

// groupName names the groups of interest (Go 1.23's CurveID.String does not know the
// hybrids).
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

// offers checks, with one handshake, which group a configuration offers first.
func offers(config *tls.Config, addr string, want tls.CurveID, what string) {
	handshake(config, addr)
	got := tls.CurveID(offeredFirst.Load())
	if want != 0 && got != want {
		fail("%s offers %s first, not %s", what, groupName(got), groupName(want))
	}
	fmt.Fprintf(os.Stderr, "legacy: %s offers %s first\n", what, groupName(got))
}

func handshakes() {
	addr := serve().String()
	roots := pool(read("server-ca.crt"))
	rounds, batch := 30, 40
	if *quick {
		rounds, batch = 4, 5
	}
	for _, key := range []string{"p256", "rsa2048"} {
		certPEM, keyPEM := read(key+"-pkcs8.crt"), read(key+"-pkcs8.key")
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			fail("%s: %v", key, err)
		}
		static := &tls.Config{
			MinVersion:   tls.VersionTLS13,
			RootCAs:      roots,
			ServerName:   "127.0.0.1",
			Certificates: []tls.Certificate{cert},
		}
		reload := &tls.Config{
			MinVersion: tls.VersionTLS13,
			RootCAs:    roots,
			ServerName: "127.0.0.1",
			// The legacy client: the Secret's bytes from the informer cache, parsed
			// again on every handshake.
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				pair, err := tls.X509KeyPair(certPEM, keyPEM)
				return &pair, err
			},
		}
		reloadX25519 := reload.Clone()
		reloadX25519.CurvePreferences = []tls.CurveID{tls.X25519}
		offers(reload, addr, 0, "the default configuration")
		offers(reloadX25519, addr, tls.X25519, "the X25519 configuration")
		configs := []*tls.Config{static, reload, reloadX25519}
		for _, clients := range []int{1, 2} {
			ids := []string{
				fmt.Sprintf("go/handshake/static/%s/%d", key, clients),
				fmt.Sprintf("go/handshake/reload/%s/%d", key, clients),
				fmt.Sprintf("go/handshake/reload-x25519/%s/%d", key, clients),
			}
			selected := false
			for _, id := range ids {
				selected = selected || wanted(id)
			}
			if !selected {
				continue
			}
			// Warm-up, then alternating batches (order reversed every round) so that
			// drift on a shared machine falls on all alike.
			for _, config := range configs {
				round(config, addr, clients, batch/2+1)
			}
			samples := make([][]float64, len(configs))
			for i := 0; i < rounds; i++ {
				for j := range configs {
					which := j
					if i%2 == 1 {
						which = len(configs) - 1 - j
					}
					samples[which] = append(samples[which], round(configs[which], addr, clients, batch))
				}
			}
			for j, id := range ids {
				emit(id, samples[j])
			}
		}
	}
}

func main() {
	flag.Parse()
	if *materialDir == "" {
		fail("-material is required")
	}
	fmt.Fprintf(os.Stderr, "legacy: %s, GOMAXPROCS %d\n", runtime.Version(), runtime.GOMAXPROCS(0))
	keyPairs()
	reconciles()
	principals()
	handshakes()
}
