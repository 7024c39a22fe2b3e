package main

// The serving anchors: the servers whose CPU per handshake our server's is compared
// with, each in a child process of its own (a second "-mode child" that runs nothing
// else, so that its CPU time between two "cpu" commands is its server's):
//
//   - serve-secret <name>: a crypto/tls server whose GetCertificate reads the
//     identity Secret bench/<name> through controller-runtime's cache-backed client
//     and parses it (tls.X509KeyPair) on every handshake: the Go package's design
//     (read the Secret, parse it, per use) applied to serving. Its client CAs are a
//     static pool (client-ca.crt), parsed once.
//   - serve-spiffe <endpoint> <trust-domain>: go-spiffe v2's
//     tlsconfig.MTLSServerConfig over an X509Source on the Workload API at endpoint
//     (the SVID presented and the callers' chains verified against the streamed
//     bundle), callers authorized as members of the trust domain
//     (tlsconfig.AuthorizeMemberOf: what our server checks in its handshake).
//
// Both answer {"addr": "host:port"}; "cpu" answers {"cpu_ns": this process's CPU
// time (getrusage, user + system)}.

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// serveSecret serves with the identity Secret bench/name read through the cache and
// parsed on every handshake.
func serveSecret(name string) net.Addr {
	if kube == nil {
		fail("serve-secret %s: no API server (send the cluster command first)", name)
	}
	waitForSecret(name)
	return listen(&tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs:  pool(read("client-ca.crt")),
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			secret := cachedSecret(name)
			pair, err := tls.X509KeyPair(secret["tls.crt"], secret["tls.key"])
			return &pair, err
		},
	})
}

// serveSpiffe serves with go-spiffe's mTLS server configuration over an X509Source
// on the Workload API at endpoint, callers authorized as members of trustDomain.
func serveSpiffe(endpoint, trustDomain string) net.Addr {
	td, err := spiffeid.TrustDomainFromString(trustDomain)
	if err != nil {
		fail("serve-spiffe: trust domain %q: %v", trustDomain, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The source streams for the life of the process; the context bounds the wait
	// for the first SVID.
	source, err := workloadapi.NewX509Source(ctx,
		workloadapi.WithClientOptions(workloadapi.WithAddr(endpoint)))
	if err != nil {
		fail("serve-spiffe: X509Source on %s: %v", endpoint, err)
	}
	config := tlsconfig.MTLSServerConfig(source, source, tlsconfig.AuthorizeMemberOf(td))
	config.MinVersion = tls.VersionTLS13
	return listen(config)
}
