// Reads [{"cert": PEM, "token": compact JWS}] on stdin and verifies each token with
// go-jose against the certificate's public key, as the Go services' VerifyAndDecode
// does (PS512, ES256, ES384 accepted). Writes [{"payload": "...", "error": "..."}].
package main

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"

	jose "github.com/go-jose/go-jose/v4"
)

type request struct {
	Cert  string `json:"cert"`
	Token string `json:"token"`
}

type answer struct {
	Payload string `json:"payload,omitempty"`
	Error   string `json:"error,omitempty"`
}

func verify(r request) answer {
	block, _ := pem.Decode([]byte(r.Cert))
	if block == nil {
		return answer{Error: "no PEM certificate"}
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return answer{Error: err.Error()}
	}
	jws, err := jose.ParseSigned(r.Token, []jose.SignatureAlgorithm{jose.PS512, jose.ES256, jose.ES384})
	if err != nil {
		return answer{Error: err.Error()}
	}
	payload, err := jws.Verify(cert.PublicKey)
	if err != nil {
		return answer{Error: err.Error()}
	}
	return answer{Payload: string(payload)}
}

func main() {
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var requests []request
	if err := json.Unmarshal(input, &requests); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	answers := make([]answer, 0, len(requests))
	for _, r := range requests {
		answers = append(answers, verify(r))
	}
	out, _ := json.Marshal(answers)
	os.Stdout.Write(out)
}
