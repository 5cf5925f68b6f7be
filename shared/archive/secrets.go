package archive

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"

	"golang.org/x/crypto/argon2"
)

// SecretsInfo says how an archive's secrets are encrypted: AES-256-GCM
// under a key derived from the operator's passphrase with Argon2id and
// Salt; Check is a known text encrypted with it, so a wrong passphrase is
// told at once rather than as garbage configuration.
type SecretsInfo struct {
	Cipher string `json:"cipher"`
	KDF    string `json:"kdf"`
	Salt   string `json:"salt"`
	Check  string `json:"check"`
}

const checkText = "botforge-archive secrets"

// Sealer encrypts and decrypts secrets with a passphrase's key.
type Sealer struct{ aead cipher.AEAD }

// ErrPassphrase: the passphrase does not open the archive's secrets.
var ErrPassphrase = errors.New("archive: the passphrase does not decrypt this archive's secrets")

func newSealer(pass string, salt []byte) (*Sealer, error) {
	key := argon2.IDKey([]byte(pass), salt, 2, 64*1024, 2, 32)
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// NewSecrets makes a fresh salt for pass and the header's description.
func NewSecrets(pass string) (*Sealer, *SecretsInfo, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return nil, nil, err
	}
	s, err := newSealer(pass, salt)
	if err != nil {
		return nil, nil, err
	}
	info := &SecretsInfo{Cipher: "AES-256-GCM", KDF: "argon2id(t=2,m=64MiB,p=2)", Salt: base64.StdEncoding.EncodeToString(salt)}
	info.Check, err = s.Seal([]byte(checkText))
	return s, info, err
}

// OpenSecrets derives the key of info from pass and checks it.
func OpenSecrets(pass string, info *SecretsInfo) (*Sealer, error) {
	salt, err := base64.StdEncoding.DecodeString(info.Salt)
	if err != nil {
		return nil, err
	}
	s, err := newSealer(pass, salt)
	if err != nil {
		return nil, err
	}
	if b, err := s.Open(info.Check); err != nil || string(b) != checkText {
		return nil, ErrPassphrase
	}
	return s, nil
}

// Seal encrypts plain (base64 of nonce and ciphertext).
func (s *Sealer) Seal(plain []byte) (string, error) {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, nil)), nil
}

// Open decrypts what Seal made.
func (s *Sealer) Open(sealed string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return nil, ErrPassphrase
	}
	out, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], nil)
	if err != nil {
		return nil, ErrPassphrase
	}
	return out, nil
}

// SealJSON encrypts a JSON value into a JSON string.
func (s *Sealer) SealJSON(v json.RawMessage) (json.RawMessage, error) {
	t, err := s.Seal(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(t)
}
