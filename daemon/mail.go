package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"berth/config"
	"berth/mail"
	"berth/share"

	"github.com/prometheus/client_golang/prometheus"
)

// mailInFlight bounds the notices being sent at once; past it, and past
// mailQueue waiting, a notice is dropped with a warning rather than piling
// up goroutines behind a slow or dead SMTP server.
const (
	mailInFlight = 4
	mailQueue    = 256
)

// mailNotifier sends berth's e-mail (share link download and upload
// notices, share invitations) for the domain packages: its Notify is
// share.Notifier's method. Without an SMTP server it logs each mail it
// would have sent, so an operator sees what went missing.
//
// Notify returns once the message is checked and queued: a request that
// triggers a notice (a download through a link) neither waits for the
// SMTP server nor loses its mail when the client goes away.
type mailNotifier struct {
	sender *mail.Sender // nil: no SMTP server configured
	log    *slog.Logger
	// mails counts each mail by result: sent, failed, dropped (queue
	// full or stopping), unsent (no SMTP server configured).
	mails *prometheus.CounterVec
	queue chan mail.Message
	wg    sync.WaitGroup
	// mu guards closed: a request finishing during shutdown may still
	// notify, and must not send on the closed queue.
	mu     sync.RWMutex
	closed bool
}

// newMailNotifier builds the notifier of cfg, reading its password and
// CA files now so a bad one stops the start. It says at start whether
// e-mail goes out. Close stops it.
func newMailNotifier(cfg config.SMTP, log *slog.Logger, reg prometheus.Registerer) (*mailNotifier, error) {
	n := &mailNotifier{log: log, mails: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_mail_total",
		Help: "E-mail notices and invitations, by result: sent, failed, dropped (queue full or stopping), unsent (no SMTP server configured).",
	}, []string{"result"})}
	for _, r := range []string{"sent", "failed", "dropped", "unsent"} {
		n.mails.WithLabelValues(r) // every series from the start, for rate()
	}
	if err := reg.Register(n.mails); err != nil {
		return nil, err
	}
	if cfg.Host == "" {
		log.Info("no SMTP server configured: e-mail notifications are not sent")
		return n, nil
	}
	s, err := mail.New(mail.Options{
		Host:               cfg.Host,
		Port:               cfg.Port,
		Security:           mail.Security(cfg.Security),
		Username:           cfg.Username,
		Password:           cfg.Password,
		PasswordFile:       cfg.PasswordFile,
		From:               cfg.From,
		Timeout:            cfg.Timeout,
		CAFile:             cfg.CAFile,
		InsecureSkipVerify: cfg.InsecureSkipVerify,
	})
	if err != nil {
		return nil, err
	}
	n.sender = s
	n.queue = make(chan mail.Message, mailQueue)
	for range mailInFlight {
		n.wg.Go(n.run)
	}
	log.Info("e-mail goes through SMTP server", "server", s.Addr(), "security", cfg.Security, "auth", cfg.Username != "")
	return n, nil
}

// Notify queues one e-mail to to. It fails at once on a recipient or
// subject mail refuses (a line break, not one address); sending failures
// come later, in the log.
func (n *mailNotifier) Notify(ctx context.Context, to, subject, body string) error {
	m := mail.Message{To: to, Subject: subject, Text: body}
	if err := m.Check(); err != nil {
		return err
	}
	if n.sender == nil {
		n.log.Info("e-mail not sent: no SMTP server configured", "to", to, "subject", subject)
		n.mails.WithLabelValues("unsent").Inc()
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.closed {
		n.log.Warn("e-mail dropped: berth is stopping", "to", to, "subject", subject)
		n.mails.WithLabelValues("dropped").Inc()
		return nil
	}
	select {
	case n.queue <- m:
	default:
		n.log.Warn("e-mail dropped: too many waiting for the SMTP server", "to", to, "subject", subject)
		n.mails.WithLabelValues("dropped").Inc()
	}
	return nil
}

// run sends queued messages until Close.
func (n *mailNotifier) run() {
	for m := range n.queue {
		start := time.Now()
		// Not the request's context: the notice outlives the request.
		if err := n.sender.Send(context.Background(), m); err != nil {
			n.log.Warn("e-mail not sent", "to", m.To, "subject", m.Subject, "err", err)
			n.mails.WithLabelValues("failed").Inc()
			continue
		}
		n.mails.WithLabelValues("sent").Inc()
		n.log.Info("e-mail sent", "to", m.To, "subject", m.Subject, "took", time.Since(start).Round(time.Millisecond))
	}
}

// Close stops taking mail and sends what is queued until ctx ends (the
// shutdown grace); what is left then is logged as lost.
func (n *mailNotifier) Close(ctx context.Context) {
	n.mu.Lock()
	if n.closed || n.queue == nil {
		n.closed = true
		n.mu.Unlock()
		return
	}
	n.closed = true
	close(n.queue)
	n.mu.Unlock()
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		n.log.Warn("stopping with e-mail unsent", "queued", len(n.queue))
	}
}

// invite mails an organization share's invitation to its new external
// subscriber (rest.Options.Invite): the token is what POST
// /api/2/shares/accept takes (docs/api.md "Organization shares").
func (n *mailNotifier) invite(ctx context.Context, inv share.Invitation) error {
	subject := "You are invited to a shared folder on berth"
	body := fmt.Sprintf("You have been invited to a shared folder (root %d).\n\n"+
		"To accept, send the invitation token to berth:\n\n"+
		"    POST /api/2/shares/accept\n    token=%s\n\n"+
		"If you did not expect this, ignore this message.\n", inv.RootID, inv.Token)
	return n.Notify(ctx, inv.Email, subject, body)
}
