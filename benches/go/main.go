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
//	serve-secret <name>, serve-spiffe <endpoint> <trust-domain>
//	    starts a server in this process whose CPU time per handshake is measured
//	    (serving.go); answers {"addr": "host:port"}.
//	cpu
//	    answers {"cpu_ns": this process's CPU time (getrusage, user + system)}.
//	spiffe <endpoint> <server-id>
//	    opens go-spiffe's X509Source on the Workload API at endpoint (unix://...) and
//	    builds its mTLS client configuration authorizing exactly server-id (the
//	    go/handshake/spiffe and go/client/svid-server/spiffe-p256 operations dial the
//	    peer named "svid-server" with it). Answered, with the SVID's SPIFFE ID, once
//	    the first SVID arrived.
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
//   - go/handshake/spiffe/p256/<clients>, go/client/svid-server/spiffe-p256: the
//     SPIFFE anchor, go-spiffe's X509Source and tlsconfig.MTLSClientConfig dialling
//     the Rust benchmark's SVID server (spiffe.go);
//   - go/pooled-rotation/<case>: the anchor for pooled rotation, client-go's
//     certificate rotation: one rotation of the mounted client certificate, the wait
//     until client-go closed its connections, and the first request after it, timed
//     alone (rotation.go; the answer adds noticed_ns, the wait).
//
// The handshake loop is a plain Go one: each client is one goroutine dialling in a
// loop (a new TCP connection and a full handshake each time, reading the server's
// byte, closing); the server handshakes explicitly, writes one byte and closes.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
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
	if name, ok := strings.CutPrefix(id, "go/pooled-rotation/"); ok {
		// Times only the first request after each rotation, not the wait for it.
		measureRotation(name, n)
		return
	}
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
		if parts[2] == "spiffe" {
			return spiffeOperation(id, clients)
		}
		config := clientConfig(parts[2], parts[3])
		addr := ownServer()
		return func(n int) { round(config, addr, clients, (n+clients-1)/clients) }
	case "client":
		if parts[2] == "svid-server" && len(parts) == 4 && parts[3] == "spiffe-p256" {
			return spiffeOperation(id, 1)
		}
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
		case fields[0] == "spiffe" && len(fields) == 3:
			answer(map[string]any{"id": connectSpiffe(fields[1], fields[2])})
		case fields[0] == "peer" && len(fields) == 3:
			peers[fields[1]] = fields[2]
			answer(map[string]any{"ok": true})
		case fields[0] == "group" && len(fields) == 2:
			group(fields[1])
		case fields[0] == "serve-secret" && len(fields) == 2:
			answer(map[string]any{"addr": serveSecret(fields[1]).String()})
		case fields[0] == "serve-spiffe" && len(fields) == 3:
			answer(map[string]any{"addr": serveSpiffe(fields[1], fields[2]).String()})
		case fields[0] == "cpu" && len(fields) == 1:
			answer(map[string]any{"cpu_ns": cpuNow()})
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
