package main

// The reconcile operations: the CA and identity Secrets read through the real
// controller-runtime cache-backed client, a tls.Config and a new http.Transport per
// reconcile, as the Go package's callers build their peer client.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

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
