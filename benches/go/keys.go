package main

// The key material operations: tls.X509KeyPair as the Go client ran it on every
// handshake, and go-jose's PS512 signing and verification of the X-Principal token.

import (
	"crypto/rsa"
	"crypto/tls"
	"encoding/json"

	jose "github.com/go-jose/go-jose/v4"
)

func keyPair(name string) operation {
	certPEM, keyPEM := read(name+".crt"), read(name+".key")
	return repeat(func() {
		if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
			fail("%s: %v", name, err)
		}
	})
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
