// Command otelhop is one hop of a distributed trace between two Rust services: an
// HTTPS server requiring a client certificate, whose handler calls the upstream URL
// over mTLS with the request's context, both sides instrumented with otelhttp (server
// span, then client span, W3C trace context extracted and injected through the global
// propagator, as the platform's Go services and generated clients do), the spans
// exported over OTLP/HTTP to -otlp-endpoint (host:port, plain HTTP, as the Go manager's
// --otlp-endpoint).
//
//	otelhop -cert F -key F -client-cert F -client-key F -callers-ca F -upstream-ca F \
//	        -upstream https://127.0.0.1:P/ -otlp-endpoint 127.0.0.1:P
//
// It prints "listening <host:port>" once it serves, and exits when its standard input
// closes, after the tracer provider has sent its spans.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

func pool(path string) *x509.CertPool {
	pem, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		log.Fatalf("%s: no certificate", path)
	}
	return p
}

func main() {
	cert := flag.String("cert", "", "server certificate (PEM)")
	key := flag.String("key", "", "server key (PEM)")
	clientCert := flag.String("client-cert", "", "client certificate for the upstream (PEM)")
	clientKey := flag.String("client-key", "", "client key for the upstream (PEM)")
	callersCA := flag.String("callers-ca", "", "CA that verifies callers (PEM)")
	upstreamCA := flag.String("upstream-ca", "", "CA that verifies the upstream server (PEM)")
	upstream := flag.String("upstream", "", "URL the handler calls")
	endpoint := flag.String("otlp-endpoint", "", "OTLP/HTTP collector, host:port")
	flag.Parse()

	ctx := context.Background()
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(*endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		log.Fatal(err)
	}
	res := resource.NewSchemaless(semconv.ServiceName("otelhop"))
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(200*time.Millisecond)),
		sdktrace.WithResource(res),
	)
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))

	serverPair, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		log.Fatal(err)
	}
	clientPair, err := tls.LoadX509KeyPair(*clientCert, *clientKey)
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: otelhttp.NewTransport(&http.Transport{TLSClientConfig: &tls.Config{
			Certificates: []tls.Certificate{clientPair},
			RootCAs:      pool(*upstreamCA),
		}}),
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, *upstream, nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	server := &http.Server{
		Handler: otelhttp.NewHandler(handler, "otelhop"),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{serverPair},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool(*callersCA),
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := server.ServeTLS(listener, "", ""); err != nil && err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()
	fmt.Printf("listening %s\n", listener.Addr())

	_, _ = io.Copy(io.Discard, os.Stdin)
	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = server.Shutdown(shutdown)
	if err := provider.Shutdown(shutdown); err != nil {
		log.Printf("tracer provider shutdown: %v", err)
	}
}
