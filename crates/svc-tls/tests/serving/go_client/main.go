// A Go crypto/tls + net/http client (the Go fleet's stack) calling the Rust
// server with a client certificate: one request per new connection, until killed.
// Prints one line per request: "ok <server leaf serial hex> <body>" or "fail <error>".
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	url, certFile, keyFile, caFile := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		panic(err)
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		panic(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		panic("no CA")
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			TLSClientConfig: &tls.Config{
				Certificates: []tls.Certificate{cert},
				RootCAs:      roots,
			},
		},
	}
	out := bufio.NewWriter(os.Stdout)
	for {
		resp, err := client.Get(url)
		if err != nil {
			fmt.Fprintf(out, "fail %v\n", err)
			out.Flush()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
			fmt.Fprintf(out, "fail body %v\n", err)
			out.Flush()
			continue
		}
		fmt.Fprintf(out, "ok %x %s\n", resp.TLS.PeerCertificates[0].SerialNumber, body)
		out.Flush()
	}
}
