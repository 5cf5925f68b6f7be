package signin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base32"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TOTP (RFC 6238, 30-second steps, 6 digits, SHA-1: what every
// authenticator app reads) with single-use codes: the step of the last
// code accepted is stored, and a code of that step or an earlier one is
// refused, under a conditional write (two concurrent uses of one code:
// one wins). Recovery codes are ten random codes, stored as SHA-256
// hashes, each usable once.

const totpPeriod = 30

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// TOTPSetup is what the account page shows to enrol an authenticator.
type TOTPSetup struct {
	Secret     string `json:"secret"`
	OTPAuthURL string `json:"otpauthUrl"`
}

// StartTOTP stores a new secret (not yet required) and answers it.
func (s *Service) StartTOTP(ctx context.Context, accountID, email string) (TOTPSetup, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "Bot platform", AccountName: email})
	if err != nil {
		return TOTPSetup{}, err
	}
	c, ver, err := s.store.GetCredentials(ctx, accountID)
	if err != nil {
		return TOTPSetup{}, err
	}
	if c.TOTPEnabled {
		return TOTPSetup{}, platform.Errorf(platform.ErrAlreadyExists, "two-factor authentication is already on: turn it off first to enrol another authenticator")
	}
	c.TOTPSecret, c.TOTPLastStep = key.Secret(), 0
	if err := s.store.PutCredentials(ctx, accountID, c, ver); err != nil {
		return TOTPSetup{}, err
	}
	return TOTPSetup{Secret: key.Secret(), OTPAuthURL: key.URL()}, nil
}

// EnableTOTP turns the second factor on once a code of the new secret is
// shown; it answers the recovery codes (shown once).
func (s *Service) EnableTOTP(ctx context.Context, accountID, code string) ([]string, error) {
	c, ver, err := s.store.GetCredentials(ctx, accountID)
	if err != nil {
		return nil, err
	}
	if c.TOTPSecret == "" {
		return nil, platform.Invalid("no authenticator is being enrolled: start the two-factor setup first")
	}
	if c.TOTPEnabled {
		return nil, platform.Errorf(platform.ErrAlreadyExists, "two-factor authentication is already on")
	}
	step, ok := s.matchTOTP(c, code)
	if !ok {
		return nil, platform.Invalid("wrong code: enter the 6 digits your authenticator shows now")
	}
	codes := make([]string, 10)
	c.RecoveryHashes = make([]string, 10)
	for i := range codes {
		codes[i] = recoveryCode()
		c.RecoveryHashes[i] = dynamo.HashToken(normRecovery(codes[i]))
	}
	c.TOTPEnabled, c.TOTPLastStep = true, step
	return codes, s.store.PutCredentials(ctx, accountID, c, ver)
}

// DisableTOTP turns the second factor off (the password is asked again).
func (s *Service) DisableTOTP(ctx context.Context, accountID, password string) error {
	c, ver, err := s.store.GetCredentials(ctx, accountID)
	if err != nil {
		return err
	}
	if c.PasswordHash != "" && !VerifyPassword(c.PasswordHash, password) {
		return platform.Forbidden("wrong password")
	}
	c.TOTPEnabled, c.TOTPSecret, c.TOTPLastStep, c.RecoveryHashes = false, "", 0, nil
	return s.store.PutCredentials(ctx, accountID, c, ver)
}

// matchTOTP finds the step (now, or one step either side for clock
// drift) whose code is code and that is later than the last one used.
func (s *Service) matchTOTP(c dynamo.Credentials, code string) (int64, bool) {
	code = strings.TrimSpace(code)
	if len(code) != 6 || c.TOTPSecret == "" {
		return 0, false
	}
	now := s.now()
	for _, d := range []int64{-1, 0, 1} {
		t := now.Add(time.Duration(d*totpPeriod) * time.Second)
		step := t.Unix() / totpPeriod
		want, err := totp.GenerateCodeCustom(c.TOTPSecret, t, totpOpts)
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 && step > c.TOTPLastStep {
			return step, true
		}
	}
	return 0, false
}

// useSecondFactor checks a TOTP or recovery code and spends it (a
// conditional write: a code is accepted once).
func (s *Service) useSecondFactor(ctx context.Context, accountID string, c dynamo.Credentials, ver int64, code string) bool {
	if step, ok := s.matchTOTP(c, code); ok {
		c.TOTPLastStep = step
		return s.store.PutCredentials(ctx, accountID, c, ver) == nil
	}
	h := dynamo.HashToken(normRecovery(code))
	for i, rh := range c.RecoveryHashes {
		if subtle.ConstantTimeCompare([]byte(rh), []byte(h)) == 1 {
			c.RecoveryHashes = append(append([]string{}, c.RecoveryHashes[:i]...), c.RecoveryHashes[i+1:]...)
			return s.store.PutCredentials(ctx, accountID, c, ver) == nil
		}
	}
	return false
}

func recoveryCode() string {
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	s := strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
	return s[:8] + "-" + s[8:]
}

func normRecovery(c string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimSpace(c), "-", ""))
}
