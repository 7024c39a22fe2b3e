package main

// The SPIFFE anchor: go-spiffe v2's X509Source (the SVID and bundle streamed from the
// Workload API) with its mTLS client configuration (tlsconfig.MTLSClientConfig: the
// SVID presented through GetClientCertificate, the server's chain verified against
// the streamed bundle and its SPIFFE ID authorized), what a Go service uses for
// SPIFFE mTLS. It dials the SVID server of the Rust benchmark, the server our SPIFFE
// arm dials, with its SVID fetched from the same Workload API (spiffe-testbed).

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// spiffeConfig is the go-spiffe client configuration, set by the "spiffe" command.
var spiffeConfig *tls.Config

// connectSpiffe opens an X509Source on the Workload API at endpoint (unix://...),
// waits for its first SVID and builds the mTLS client configuration that authorizes
// exactly serverID. Answers the SPIFFE ID of the SVID it will present.
func connectSpiffe(endpoint, serverID string) string {
	id, err := spiffeid.FromString(serverID)
	if err != nil {
		fail("spiffe: server ID %q: %v", serverID, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The source streams for the life of the process (one per process, as the Go
	// package's InitSPIFFE opens it); the context bounds the wait for the first SVID.
	source, err := workloadapi.NewX509Source(ctx,
		workloadapi.WithClientOptions(workloadapi.WithAddr(endpoint)))
	if err != nil {
		fail("spiffe: X509Source on %s: %v", endpoint, err)
	}
	svid, err := source.GetX509SVID()
	if err != nil {
		fail("spiffe: no SVID from %s: %v", endpoint, err)
	}
	spiffeConfig = tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeID(id))
	return svid.ID.String()
}

// spiffeOperation is go-spiffe's client dialling the peer named "svid-server" with
// `clients` goroutines.
func spiffeOperation(id string, clients int) operation {
	if spiffeConfig == nil {
		fail("%s: no Workload API (send the spiffe command first)", id)
	}
	addr, ok := peers["svid-server"]
	if !ok {
		fail("%s: no peer named svid-server", id)
	}
	return func(n int) { round(spiffeConfig, addr, clients, (n+clients-1)/clients) }
}
