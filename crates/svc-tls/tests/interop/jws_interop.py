#!/usr/bin/env python3
"""Independent JOSE side of the principal interop test (PyJWT + cryptography).

Reads one JSON request on stdin and writes one JSON answer on stdout:

  request = {
    "verify": [{"name", "alg", "cert_pem", "token"}],   # tokens produced by Rust
    "sign":   [{"name", "alg", "key_pem", "payload"}],   # tokens for Rust to verify
    "sign_max_salt": [{"name", "key_pem", "payload"}],   # PS512 with the maximum salt
  }
  answer = {
    "verified": [{"name", "header", "payload"}],
    "signed": [{"name", "alg", "token"}],
    "signed_max_salt": [{"name", "token"}],
  }

Any verification failure exits non-zero with a message on stderr. For PS512 the
signature is also checked with `cryptography` directly at salt length 64 (the
wire format), and a tampered copy must be rejected (so the check is not vacuous).
"""

import base64
import json
import sys

import jwt
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding


def b64d(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def fail(message: str) -> None:
    print(f"jws_interop.py: {message}", file=sys.stderr)
    sys.exit(1)


def verify(item: dict) -> dict:
    name, alg, token = item["name"], item["alg"], item["token"]
    public_key = x509.load_pem_x509_certificate(item["cert_pem"].encode()).public_key()
    jws = jwt.PyJWS()
    try:
        decoded = jws.decode_complete(token, public_key, algorithms=[alg])
    except jwt.PyJWTError as error:
        fail(f"{name}: PyJWT rejected our {alg} token: {error!r}")
    header = decoded["header"]
    payload = json.loads(decoded["payload"])

    header_b64, payload_b64, signature_b64 = token.split(".")
    raw_header = json.loads(b64d(header_b64))
    # {"alg":...,"iat":...,"exp":...,"aud":...,"jti":...}: PyJWT (like go-jose)
    # accepts the extra members of the protected header; the times are integers,
    # exp after iat; the audience is the receiver's origin, a string; the jti 128
    # random bits, base64url (22 characters).
    if (
        sorted(raw_header) != ["alg", "aud", "exp", "iat", "jti"]
        or not isinstance(raw_header["jti"], str)
        or len(raw_header["jti"]) != 22
        or raw_header["alg"] != alg
        or not isinstance(raw_header["iat"], int)
        or not isinstance(raw_header["exp"], int)
        or raw_header["exp"] <= raw_header["iat"]
        or not isinstance(raw_header["aud"], str)
        or not raw_header["aud"].startswith("https://")
    ):
        fail(f"{name}: protected header is not {{alg, iat, exp, aud, jti}}: {b64d(header_b64)!r}")
    if alg == "PS512":
        try:
            public_key.verify(
                b64d(signature_b64),
                f"{header_b64}.{payload_b64}".encode(),
                padding.PSS(mgf=padding.MGF1(hashes.SHA512()), salt_length=64),
                hashes.SHA512(),
            )
        except InvalidSignature:
            fail(f"{name}: signature does not verify as RSA-PSS SHA-512, MGF1-SHA-512, salt 64")

    tampered_payload = b64e(json.dumps({**payload, "actor": "mallory"}).encode())
    tampered = f"{header_b64}.{tampered_payload}.{signature_b64}"
    try:
        jws.decode_complete(tampered, public_key, algorithms=[alg])
    except jwt.InvalidSignatureError:
        pass
    else:
        fail(f"{name}: PyJWT accepted a tampered token; the check is vacuous")
    return {"name": name, "header": header, "payload": payload}


def load_key(pem: str):
    return serialization.load_pem_private_key(pem.encode(), password=None)


def sign(item: dict) -> dict:
    key = load_key(item["key_pem"])
    token = jwt.encode(item["payload"], key, algorithm=item["alg"])
    return {"name": item["name"], "alg": item["alg"], "token": token}


def sign_max_salt(item: dict) -> dict:
    key = load_key(item["key_pem"])
    header = b64e(b'{"alg":"PS512"}')
    payload = b64e(json.dumps(item["payload"]).encode())
    signing_input = f"{header}.{payload}".encode()
    signature = key.sign(
        signing_input,
        padding.PSS(mgf=padding.MGF1(hashes.SHA512()), salt_length=padding.PSS.MAX_LENGTH),
        hashes.SHA512(),
    )
    return {"name": item["name"], "token": f"{header}.{payload}.{b64e(signature)}"}


def main() -> None:
    request = json.load(sys.stdin)
    answer = {
        "verified": [verify(item) for item in request.get("verify", [])],
        "signed": [sign(item) for item in request.get("sign", [])],
        "signed_max_salt": [sign_max_salt(item) for item in request.get("sign_max_salt", [])],
    }
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
