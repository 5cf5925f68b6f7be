package signin

import (
	"context"
	"fmt"

	"github.com/botforge/platform/shared/mail"
	"github.com/botforge/platform/shared/platform"
)

// Invitation mail (docs/signin.md): when the operator configures an SMTP
// server (shared/mail), an invitation's link is also mailed to the
// invited address. The link is answered to the inviter either way: a mail
// that fails is the caller's to log, never the invitation's failure.

// Mails tells whether invitation links are mailed.
func (s *Service) Mails() bool { return s.cfg.Mail != nil }

// MailInvitation mails an invitation's link to its address.
func (s *Service) MailInvitation(ctx context.Context, to, link, expiresAt, workspaceID string, role platform.Role, invitedBy string) error {
	if s.cfg.Mail == nil {
		return nil
	}
	name := workspaceID
	if w, err := s.store.GetWorkspace(ctx, workspaceID); err == nil && w.Name != "" {
		name = w.Name
	}
	body := fmt.Sprintf(`%s invited you to the workspace %q as %s.

Open this link to accept the invitation and choose how you sign in (it
works once, until %s):

%s

If you did not expect this invitation, ignore this mail.
`, invitedBy, name, role, expiresAt, link)
	return s.cfg.Mail.Send(ctx, mail.Message{To: to, Subject: "Invitation to the workspace " + name, Body: body})
}
