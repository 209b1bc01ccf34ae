package share

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth/account"
	"berth/kv"
	"berth/vfs"
)

// Errors of share links, besides ErrForbidden and ErrNotFound.
var (
	// ErrLinkExpired: the link's expiry date has passed (it is usable
	// through the whole day it names, in UTC).
	ErrLinkExpired = errors.New("share: the share link has expired")
	// ErrDownloadLimit: the link's download_limit is reached; nothing is
	// served.
	ErrDownloadLimit = errors.New("share: the share link's download limit is reached")
	// ErrLoginRequired: the link has login_required and the caller is not
	// signed in as its creator or one of its subscribers.
	ErrLoginRequired = errors.New("share: the share link requires signing in as a subscriber")
	// ErrInvalidDate: an expiry date that is not YYYY-MM-DD.
	ErrInvalidDate = errors.New("share: the date is not in the form YYYY-MM-DD")
	// ErrNoLinks: the Service was built without a Store.
	ErrNoLinks = errors.New("share: share links are not kept by this service")
)

// Notifier sends the notices of download_notify and upload_notify to a
// link's creator. The daemon wires a mail sender; sending is best effort.
type Notifier interface {
	Notify(ctx context.Context, to, subject, body string) error
}

// DateLayout is the form of a link's expiry date.
const DateLayout = "2006-01-02"

// Link is a file or folder share link (spec 2.18). Its subscribers and
// counters live in the same record, so one transaction checks and moves
// the download count against the limit.
type Link struct {
	ID        uint64    `json:"id"`
	Hash      string    `json:"hash"`
	RootID    uint64    `json:"root_id"`
	FileID    uint64    `json:"file_id,omitempty"`
	FolderID  uint64    `json:"folder_id,omitempty"`
	CreatorID uint64    `json:"creator_id"`
	Created   time.Time `json:"created"`
	// Expires is the last day the link works (YYYY-MM-DD, UTC); "" never.
	Expires         string `json:"expires,omitempty"`
	LoginRequired   bool   `json:"login_required"`
	DownloadLimit   *int64 `json:"download_limit,omitempty"`
	DownloadNotify  bool   `json:"download_notify"`
	UploadNotify    bool   `json:"upload_notify"`
	AnonEdit        bool   `json:"anon_edit"`
	ReadAccess      bool   `json:"read_access"`
	WriteAccess     bool   `json:"write_access"`
	DeleteAccess    bool   `json:"delete_access"`
	TimesDownloaded int64  `json:"times_downloaded"`
	TimesViewed     int64  `json:"times_viewed"`
	// Resumed is, under a download_limit, what resumptions sent less
	// what the downloads counted let them send free, in millionths of a
	// download (count): below 0 a credit, above it a download begun.
	Resumed int64 `json:"resumed,omitempty"`
	// ResumedETag is the entity tag of the content a credit (Resumed
	// below 0) was given for: only resumptions of that content draw on
	// it, so a download of a small item buys no free copy of a large
	// one. "" with a credit is a link stored before the tag was (count).
	ResumedETag string `json:"resumed_etag,omitempty"`
	// NextSub numbers the subscribers.
	NextSub     uint64       `json:"next_sub"`
	Subscribers []Subscriber `json:"subscribers,omitempty"`
}

// Folder reports whether the link shares a folder.
func (l Link) Folder() bool { return l.FolderID != 0 }

// LimitReached reports whether download_limit is used up: no download,
// resumption or preview of the link's contents is served any more.
func (l Link) LimitReached() bool {
	return l.DownloadLimit != nil && l.TimesDownloaded >= *l.DownloadLimit
}

// ItemID is the shared file's or folder's id.
func (l Link) ItemID() uint64 {
	if l.FolderID != 0 {
		return l.FolderID
	}
	return l.FileID
}

// Requester names the link as the one who is served what anyone
// downloads through it (vfs.ZipOptions.Requester): every holder of a
// link, whatever their address or account, shares the link's part of
// what the server lends to zips, so one holder who keeps its zips open
// slows that link's other holders first, and those of its maker's other
// links (RequesterGroup), never anyone else's. A person is named
// "person:<id>" (account.Person.Principal), so the two never meet.
func (l Link) Requester() string { return "link:" + strconv.FormatUint(l.ID, 10) }

// RequesterGroup is who the link's zips count with (vfs.ZipOptions.Group):
// every link its maker made. A person makes as many links as they like,
// each a requester of its own: counted apart, ten links to a large
// folder, each downloaded slowly, held all but 1/2048 of the budget and
// kept every other zip of the server refused. So one holder of a link
// who keeps its zips open slows the holders of that person's other
// links, never anyone else, nor the person's own zips ("person:<id>",
// a group of one).
func (l Link) RequesterGroup() string {
	if l.CreatorID == 0 {
		return ""
	}
	return "links of " + account.Person{ID: l.CreatorID}.Principal()
}

// Expired reports whether the link's last day is before now's (UTC).
func (l Link) Expired(now time.Time) bool {
	return l.Expires != "" && now.UTC().Format(DateLayout) > l.Expires
}

// Subscriber is one subscriber of a link (spec 2.19), with its own hash
// and counters.
type Subscriber struct {
	ID   uint64 `json:"id"`
	Hash string `json:"hash"`
	// Kind is person, guest, group or email.
	Kind string `json:"kind"`
	// SubjectID is the person's, guest's or group's id; Email the address
	// of an email subscriber.
	SubjectID       uint64 `json:"subject_id,omitempty"`
	Email           string `json:"email,omitempty"`
	ReadAccess      bool   `json:"read_access"`
	WriteAccess     bool   `json:"write_access"`
	DeleteAccess    bool   `json:"delete_access"`
	TimesDownloaded int64  `json:"times_downloaded"`
	TimesViewed     int64  `json:"times_viewed"`
}

// LinkSettings are what a creator sets on a link; a nil field is left as
// it is (on creation: the default).
type LinkSettings struct {
	Expires        *string // "" removes the expiry
	LoginRequired  *bool
	DownloadLimit  **int64 // a nil *int64 removes the limit
	DownloadNotify *bool
	UploadNotify   *bool
	AnonEdit       *bool
	ReadAccess     *bool
	WriteAccess    *bool
	DeleteAccess   *bool
}

// apply sets s on l, checking the date.
func (s LinkSettings) apply(l *Link) error {
	if s.Expires != nil {
		if *s.Expires != "" {
			d, err := time.Parse(DateLayout, *s.Expires)
			if err != nil || d.Format(DateLayout) != *s.Expires {
				return ErrInvalidDate
			}
		}
		l.Expires = *s.Expires
	}
	set := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	set(&l.LoginRequired, s.LoginRequired)
	set(&l.DownloadNotify, s.DownloadNotify)
	set(&l.UploadNotify, s.UploadNotify)
	set(&l.AnonEdit, s.AnonEdit)
	set(&l.ReadAccess, s.ReadAccess)
	set(&l.WriteAccess, s.WriteAccess)
	set(&l.DeleteAccess, s.DeleteAccess)
	if s.DownloadLimit != nil {
		if v := *s.DownloadLimit; v != nil && *v < 0 {
			return fmt.Errorf("%w: download_limit is negative", account.ErrInvalid)
		}
		l.DownloadLimit = *s.DownloadLimit
	}
	if l.Folder() {
		return nil
	}
	l.UploadNotify = false
	return nil
}

func linkKey(id uint64) []byte { return kv.Key(kv.ShareLink, id) }
func hashKey(h string) []byte  { return append([]byte(kv.ShareLinkHash), h...) }
func creatorKey(c, id uint64) []byte {
	return kv.Key(kv.ShareLinkCreator, c, id)
}
func subjectKey(p, id uint64) []byte { return kv.Key(kv.ShareLinkSubject, p, id) }

// newHash returns 144 random bits, URL-safe, with at least one letter so
// that a hash never reads as an id.
func newHash() (string, error) {
	for {
		b := make([]byte, 18)
		if _, err := rand.Read(b); err != nil {
			return "", err
		}
		h := base64.RawURLEncoding.EncodeToString(b)
		if _, err := strconv.ParseUint(h, 10, 64); err != nil {
			return h, nil
		}
	}
}

func (s *Service) links() error {
	if s.db == nil {
		return ErrNoLinks
	}
	return nil
}

// CreateLink shares the file (dir false) or folder itemID of root rootID
// as a link of c's. c needs Reshare there and a policy with
// user_create_shares; secure_shares forces login_required.
func (s *Service) CreateLink(ctx context.Context, c account.Caller, rootID, itemID uint64, dir bool, set LinkSettings) (Link, error) {
	if err := s.links(); err != nil {
		return Link{}, err
	}
	a, err := s.Root(ctx, c, rootID)
	if err != nil {
		return Link{}, err
	}
	if !a.Perms.Has(Reshare) {
		return Link{}, refuse("you may not share items of this root")
	}
	if !c.Person.CanShare(c.Organization.Policy) {
		return Link{}, refuse("your organization's policy does not let its persons create shares (can_share is false)")
	}
	n, err := s.fs.Stat(ctx, rootID, itemID)
	if err != nil {
		return Link{}, err
	}
	if n.Dir != dir {
		return Link{}, vfs.ErrNotExist
	}
	l := Link{RootID: rootID, CreatorID: c.Person.ID, Created: time.Now().UTC(), ReadAccess: true}
	if dir {
		l.FolderID = itemID
	} else {
		l.FileID = itemID
	}
	if err := set.apply(&l); err != nil {
		return Link{}, err
	}
	if c.Organization.Policy.SecureShares || a.Policy.SecureShares {
		l.LoginRequired = true
	}
	if l.ID, err = s.db.NextID(ctx, "sharelink"); err != nil {
		return Link{}, err
	}
	if l.Hash, err = newHash(); err != nil {
		return Link{}, err
	}
	err = s.db.Update(ctx, func(tx kv.Txn) error {
		if err := s.putLink(tx, l); err != nil {
			return err
		}
		if err := tx.Set(hashKey(l.Hash), kv.Key("", l.ID)); err != nil {
			return err
		}
		if err := tx.Set(creatorKey(l.CreatorID, l.ID), nil); err != nil {
			return err
		}
		return s.recordLink(ctx, tx, account.ActShareLinkCreated, c, l)
	})
	return l, err
}

func (s *Service) putLink(tx kv.Txn, l Link) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return tx.Set(linkKey(l.ID), b)
}

func getLink(tx kv.Txn, id uint64) (Link, error) {
	b, err := tx.Get(linkKey(id))
	if errors.Is(err, kv.ErrNotFound) {
		return Link{}, ErrNotFound
	}
	if err != nil {
		return Link{}, err
	}
	var l Link
	return l, json.Unmarshal(b, &l)
}

// resolve finds the link of ref: an id (digits) or a link's or
// subscriber's hash. sub is the subscriber's index when ref is one's hash,
// else -1.
func resolve(tx kv.Txn, ref string) (l Link, sub int, byHash bool, err error) {
	if id, perr := strconv.ParseUint(ref, 10, 64); perr == nil {
		l, err = getLink(tx, id)
		return l, -1, false, err
	}
	b, err := tx.Get(hashKey(ref))
	if errors.Is(err, kv.ErrNotFound) || len(b) != 8 {
		return Link{}, -1, true, ErrNotFound
	}
	if err != nil {
		return Link{}, -1, true, err
	}
	l, err = getLink(tx, binary.BigEndian.Uint64(b))
	if err != nil {
		return Link{}, -1, true, err
	}
	if l.Hash == ref {
		return l, -1, true, nil
	}
	for i, sb := range l.Subscribers {
		if sb.Hash == ref {
			return l, i, true, nil
		}
	}
	return Link{}, -1, true, ErrNotFound
}

// ManagedLink returns link ref (id or hash) for its creator to manage.
// Anyone else gets ErrNotFound, so ids cannot be probed.
func (s *Service) ManagedLink(ctx context.Context, c account.Caller, ref string) (Link, error) {
	if err := s.links(); err != nil {
		return Link{}, err
	}
	var l Link
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		l, _, _, err = resolve(tx, ref)
		return err
	})
	if err != nil {
		return Link{}, err
	}
	if l.CreatorID != c.Person.ID || !c.Person.Active {
		return Link{}, ErrNotFound
	}
	return l, nil
}

// UpdateLink changes link id of c's.
func (s *Service) UpdateLink(ctx context.Context, c account.Caller, id uint64, set LinkSettings) (Link, error) {
	return s.changeLink(ctx, c, id, func(_ kv.Txn, l *Link) error {
		if err := set.apply(l); err != nil {
			return err
		}
		if c.Organization.Policy.SecureShares {
			l.LoginRequired = true
		}
		return nil
	})
}

// changeLink runs fn on link id of c's in one transaction, which fn
// also writes the link's indexes in: a link and the hashes and subject
// entries naming its subscribers change together, so that no crash or
// failure leaves a subscriber whose URL does not resolve, or an index
// naming one that is gone. fn may run more than once (kv.Store.Update).
func (s *Service) changeLink(ctx context.Context, c account.Caller, id uint64, fn func(kv.Txn, *Link) error) (Link, error) {
	if err := s.links(); err != nil {
		return Link{}, err
	}
	var out Link
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		l, err := getLink(tx, id)
		if err != nil {
			return err
		}
		if l.CreatorID != c.Person.ID {
			return ErrNotFound
		}
		if err := fn(tx, &l); err != nil {
			return err
		}
		out = l
		if err := s.putLink(tx, l); err != nil {
			return err
		}
		return s.recordLink(ctx, tx, account.ActShareLinkUpdated, c, l)
	})
	return out, err
}

// DeleteLink removes link id of c's with its hashes and indexes.
func (s *Service) DeleteLink(ctx context.Context, c account.Caller, id uint64) error {
	if err := s.links(); err != nil {
		return err
	}
	return s.db.Update(ctx, func(tx kv.Txn) error {
		l, err := getLink(tx, id)
		if err != nil {
			return err
		}
		if l.CreatorID != c.Person.ID {
			return ErrNotFound
		}
		if err := s.recordLink(ctx, tx, account.ActShareLinkDeleted, c, l); err != nil {
			return err
		}
		keys := [][]byte{linkKey(id), hashKey(l.Hash), creatorKey(l.CreatorID, id)}
		for _, sb := range l.Subscribers {
			keys = append(keys, hashKey(sb.Hash))
			if sb.indexed() {
				keys = append(keys, subjectKey(sb.SubjectID, id))
			}
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// SubscriberKinds are the kinds of subscriber a link takes.
var SubscriberKinds = []string{"person", "guest", "group", "email"}

// MaxLinkSubscribers bounds the subscribers of one link, and
// MaxSubscriberEmail an e-mail subscriber's address (RFC 5321's 254
// bytes of a path, less its brackets). The subscribers live in the link's
// record, which every use of the link reads and every counted download
// or view writes whole: with neither bound, 18 subscribers of 60 KB
// addresses made each download of the link write 1.1 MB to the store
// and take 30 times as long, for anyone who fetched it in a loop.
const (
	MaxLinkSubscribers = 256
	MaxSubscriberEmail = 254
)

// AddSubscriber adds a subscriber to link id of c's. Persons and guests
// must exist; the new subscriber's access defaults to the link's. A
// subscriber the link has already (subscriberOf) is answered as it is,
// its access unchanged (UpdateSubscriber changes it), and nothing is
// written. The entry, its hash and its subject index entry are written
// in one transaction.
func (s *Service) AddSubscriber(ctx context.Context, c account.Caller, id uint64, sb Subscriber) (Subscriber, error) {
	switch sb.Kind {
	case "person", "guest", "group":
		if sb.SubjectID == 0 {
			return Subscriber{}, fmt.Errorf("%w: subscriber_id is required", account.ErrInvalid)
		}
	case "email":
		if !strings.Contains(sb.Email, "@") {
			return Subscriber{}, fmt.Errorf("%w: email is not an e-mail address", account.ErrInvalid)
		}
		if len(sb.Email) > MaxSubscriberEmail {
			return Subscriber{}, &account.FieldError{Field: "email", Reason: fmt.Sprintf("longer than an e-mail address may be (%d bytes)", MaxSubscriberEmail)}
		}
	default:
		return Subscriber{}, fmt.Errorf("%w: subscriber_type is one of person, guest, group, email", account.ErrInvalid)
	}
	// Persons, guests and groups are the creator's organization's: one
	// of another is subscribed by e-mail, so ids of others cannot be
	// probed here.
	if (sb.Kind == "person" || sb.Kind == "guest") && s.accounts != nil {
		p, err := s.accounts.Person(ctx, sb.SubjectID)
		if err != nil || p.Guest != (sb.Kind == "guest") || p.OrganizationID != c.Person.OrganizationID {
			return Subscriber{}, ErrNotFound
		}
		sb.Email = p.Email
	}
	if sb.Kind == "group" && s.accounts != nil {
		g, err := s.accounts.Group(ctx, sb.SubjectID)
		if err != nil || g.OrganizationID != c.Person.OrganizationID {
			return Subscriber{}, ErrNotFound
		}
	}
	h, err := newHash()
	if err != nil {
		return Subscriber{}, err
	}
	var out Subscriber
	l, err := s.changeLink(ctx, c, id, func(tx kv.Txn, l *Link) error {
		if i := l.subscriberOf(sb); i >= 0 {
			out = l.Subscribers[i]
			return errUnchanged
		}
		if len(l.Subscribers) >= MaxLinkSubscribers {
			return &account.FieldError{Field: "subscribers", Reason: fmt.Sprintf("the link has %d subscribers, as many as a link holds: remove one first", len(l.Subscribers))}
		}
		l.NextSub++
		out = sb
		out.ID, out.Hash, out.TimesDownloaded, out.TimesViewed = l.NextSub, h, 0, 0
		l.Subscribers = append(l.Subscribers, out)
		if err := tx.Set(hashKey(h), kv.Key("", id)); err != nil {
			return err
		}
		if out.indexed() {
			return tx.Set(subjectKey(out.SubjectID, id), nil)
		}
		return nil
	})
	if errors.Is(err, errUnchanged) {
		return out, nil
	}
	if err != nil {
		return Subscriber{}, err
	}
	if out.Kind == "email" {
		s.tellSubscriber(ctx, c, l, out)
	}
	return out, nil
}

// tellSubscriber mails a new e-mail subscriber its own URL, the one way
// it opens a login_required link (matches), best effort: from the
// creator's mail budget, as the link's notices are, and only where berth
// knows its public address (share.Options.PublicURL). Otherwise, or past
// the budget, the creator passes on the URL the answer carries.
func (s *Service) tellSubscriber(ctx context.Context, c account.Caller, l Link, sb Subscriber) {
	if s.notify == nil || s.publicURL == "" {
		return
	}
	who := cmp.Or(c.Person.DisplayName, c.Person.Username)
	name := s.itemName(ctx, l)
	url := strings.TrimRight(s.publicURL, "/") + "/s/" + sb.Hash
	s.mailFor(ctx, l, sb.Email, fmt.Sprintf("%s shared %q with you", who, name),
		fmt.Sprintf("%s shared %q with you on berth: %s\n\nThe link is yours: do not pass it on.\n", who, name, url))
}

// errUnchanged ends a changeLink that found nothing to change, so that
// nothing is written or recorded; its caller answers nil.
var errUnchanged = errors.New("share: nothing to change")

// indexed reports whether sb has an entry in the subject index
// (ShareLinkSubject), which SubjectLinks reads: persons and guests, whose
// ids are of one sequence. A group's id is of another, and may be a
// person's: it has none.
func (sb Subscriber) indexed() bool {
	return sb.SubjectID != 0 && (sb.Kind == "person" || sb.Kind == "guest")
}

// subscriberOf returns the index of l's entry for the subscriber sb
// names (the same kind and id; for an e-mail subscriber the same
// address, compared as logins are), or -1. A subscriber is on a link
// once: a second entry of the same person would share the first's
// subject index entry, which removing either dropped for both.
func (l Link) subscriberOf(sb Subscriber) int {
	for i, o := range l.Subscribers {
		if o.Kind != sb.Kind {
			continue
		}
		if sb.Kind == "email" && strings.ToLower(o.Email) == strings.ToLower(sb.Email) ||
			sb.Kind != "email" && o.SubjectID == sb.SubjectID {
			return i
		}
	}
	return -1
}

// UpdateSubscriber sets a subscriber's access flags (nil leaves one).
func (s *Service) UpdateSubscriber(ctx context.Context, c account.Caller, id, subID uint64, read, write, del *bool) (Subscriber, error) {
	var out Subscriber
	_, err := s.changeLink(ctx, c, id, func(_ kv.Txn, l *Link) error {
		for i := range l.Subscribers {
			if sb := &l.Subscribers[i]; sb.ID == subID {
				for _, f := range []struct {
					dst *bool
					v   *bool
				}{{&sb.ReadAccess, read}, {&sb.WriteAccess, write}, {&sb.DeleteAccess, del}} {
					if f.v != nil {
						*f.dst = *f.v
					}
				}
				out = *sb
				return nil
			}
		}
		return ErrNotFound
	})
	return out, err
}

// RemoveSubscriber removes subscriber subID of link id of c's, with its
// hash and, unless another entry of the link still names the same person
// or guest (a link stored before a subscriber was kept once), its subject
// index entry.
func (s *Service) RemoveSubscriber(ctx context.Context, c account.Caller, id, subID uint64) error {
	_, err := s.changeLink(ctx, c, id, func(tx kv.Txn, l *Link) error {
		i := slices.IndexFunc(l.Subscribers, func(sb Subscriber) bool { return sb.ID == subID })
		if i < 0 {
			return ErrNotFound
		}
		gone := l.Subscribers[i]
		l.Subscribers = slices.Delete(slices.Clone(l.Subscribers), i, i+1)
		if err := tx.Delete(hashKey(gone.Hash)); err != nil {
			return err
		}
		if !gone.indexed() || slices.ContainsFunc(l.Subscribers, func(sb Subscriber) bool {
			return sb.indexed() && sb.SubjectID == gone.SubjectID
		}) {
			return nil
		}
		return tx.Delete(subjectKey(gone.SubjectID, id))
	})
	return err
}

// subjectBatch bounds the links, or the index entries, one transaction of
// IndexLinkSubjects reads.
const subjectBatch = 500

// IndexLinkSubjects makes the subject index (ShareLinkSubject, which
// SubjectLinks and so a guest's shares listing read) name each person and
// guest that a link has an entry of, and nothing else, and returns how
// many index entries it added or removed. The daemon runs it once at
// start, for links stored by a berth before a subscriber and its index
// entry changed in one transaction (49523ab and before): its removal of a
// group subscriber, or of a second entry of a guest, deleted the entry of
// the guest of that id who stayed subscribed, and a failure between its
// two transactions left an entry out or one over. The link kept working
// for the guest while guest/<id>/shares left it out, or listed a link the
// guest was no longer on, for good.
func (s *Service) IndexLinkSubjects(ctx context.Context) (int, error) {
	if err := s.links(); err != nil {
		return 0, err
	}
	changed := 0
	// batches runs step on the keys under prefix, at most subjectBatch
	// of them to a transaction.
	batches := func(prefix string, step func(tx kv.Txn, k, v []byte) (bool, error)) error {
		start := []byte(prefix)
		for start != nil {
			var next []byte
			n := 0
			err := s.db.Update(ctx, func(tx kv.Txn) error {
				next, n = nil, 0
				type kvPair struct{ k, v []byte }
				var batch []kvPair
				if err := tx.Scan([]byte(prefix), start, func(k, v []byte) error {
					if len(batch) == subjectBatch {
						next = slices.Clone(k)
						return kv.ErrStop
					}
					batch = append(batch, kvPair{slices.Clone(k), slices.Clone(v)})
					return nil
				}); err != nil {
					return err
				}
				for _, p := range batch {
					ch, err := step(tx, p.k, p.v)
					if err != nil {
						return err
					}
					if ch {
						n++
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			changed += n
			start = next
		}
		return nil
	}
	// Entries left out: each link's persons and guests.
	err := batches(kv.ShareLink, func(tx kv.Txn, k, v []byte) (bool, error) {
		var l Link
		if err := json.Unmarshal(v, &l); err != nil {
			return false, fmt.Errorf("share: decode link %d: %w", kv.Uint64At(k, len(kv.ShareLink)), err)
		}
		id := kv.Uint64At(k, len(kv.ShareLink))
		added := false
		for _, sb := range l.Subscribers {
			if !sb.indexed() {
				continue
			}
			_, err := tx.Get(subjectKey(sb.SubjectID, id))
			if err == nil {
				continue
			}
			if !errors.Is(err, kv.ErrNotFound) {
				return false, err
			}
			if err := tx.Set(subjectKey(sb.SubjectID, id), nil); err != nil {
				return false, err
			}
			added = true
		}
		return added, nil
	})
	if err != nil {
		return changed, err
	}
	// Entries over: of a link gone, or that no entry of the link names.
	err = batches(kv.ShareLinkSubject, func(tx kv.Txn, k, _ []byte) (bool, error) {
		pid, id := kv.Uint64At(k, len(kv.ShareLinkSubject)), kv.Uint64At(k, len(kv.ShareLinkSubject)+8)
		l, err := getLink(tx, id)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return false, err
		}
		if err == nil && slices.ContainsFunc(l.Subscribers, func(sb Subscriber) bool { return sb.indexed() && sb.SubjectID == pid }) {
			return false, nil
		}
		return true, tx.Delete(k)
	})
	return changed, err
}

// SubjectLinks returns the links person or guest pid subscribes to.
func (s *Service) SubjectLinks(ctx context.Context, pid uint64) ([]Link, error) {
	if err := s.links(); err != nil {
		return nil, err
	}
	var out []Link
	err := s.db.View(ctx, func(tx kv.Txn) error {
		prefix := kv.Key(kv.ShareLinkSubject, pid)
		var ids []uint64
		if err := tx.Scan(prefix, nil, func(k, _ []byte) error {
			ids = append(ids, binary.BigEndian.Uint64(k[len(prefix):]))
			return nil
		}); err != nil {
			return err
		}
		for _, id := range ids {
			l, err := getLink(tx, id)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, l)
		}
		return nil
	})
	return out, err
}

// LinkAccess is a link opened by someone using it: the link, the
// subscriber whose hash was used (nil for the link's own hash or id), the
// shared root and what the user may do there.
type LinkAccess struct {
	Link       Link
	Subscriber *Subscriber
	Root       vfs.Root
	Perms      Perm
	// via is the subscriber hash the link was opened by ("" for the
	// link's own hash or its id): an e-mail subscriber is admitted only
	// by its own (matches).
	via string
}

// OpenLink opens link ref for use. ref is a hash (anyone holding it, when
// the link does not require login) or an id (only its creator or a
// subscriber signed in: an id is guessable). c is nil when no token came.
//
// Errors: ErrNotFound; ErrLinkExpired; ErrLoginRequired.
func (s *Service) OpenLink(ctx context.Context, ref string, c *account.Caller) (LinkAccess, error) {
	if err := s.links(); err != nil {
		return LinkAccess{}, err
	}
	var (
		l      Link
		sub    int
		byHash bool
	)
	err := s.db.View(ctx, func(tx kv.Txn) error {
		var err error
		l, sub, byHash, err = resolve(tx, ref)
		return err
	})
	if err != nil {
		return LinkAccess{}, err
	}
	secure, err := s.creatorShares(ctx, l)
	if err != nil {
		return LinkAccess{}, err
	}
	l.LoginRequired = l.LoginRequired || secure
	via := ""
	if sub >= 0 {
		via = ref
	}
	member := c != nil && c.Person.Active && (c.Person.ID == l.CreatorID || s.subscribed(ctx, l, *c, via))
	if !byHash && !member {
		return LinkAccess{}, ErrNotFound
	}
	if l.LoginRequired && !member {
		return LinkAccess{}, ErrLoginRequired
	}
	if l.Expired(time.Now()) {
		return LinkAccess{}, ErrLinkExpired
	}
	la := LinkAccess{Link: l, Perms: View, via: via}
	read, write, del := l.ReadAccess, l.WriteAccess, l.DeleteAccess
	if sub >= 0 {
		sb := l.Subscribers[sub]
		la.Subscriber = &sb
		read, write, del = sb.ReadAccess, sb.WriteAccess, sb.DeleteAccess
	}
	// Reached by who the caller is (an id, or a link that requires
	// signing in), not by a hash anyone may hold: a subscriber then uses
	// their own entries (the union, counted on the first), never the
	// link's or another subscriber's access, which may be more.
	if member && (!byHash || l.LoginRequired) && c.Person.ID != l.CreatorID {
		read, write, del = false, false, false
		la.Subscriber = nil
		for _, sb := range l.Subscribers {
			if !s.matches(ctx, sb, *c, via) {
				continue
			}
			if la.Subscriber == nil {
				la.Subscriber = &sb
			}
			read, write, del = read || sb.ReadAccess, write || sb.WriteAccess, del || sb.DeleteAccess
		}
	}
	if read {
		la.Perms |= Read
	}
	if write {
		la.Perms |= Write
	}
	if del {
		la.Perms |= Delete
	}
	r, err := s.fs.Root(ctx, l.RootID)
	if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrRootDeleted) {
		return LinkAccess{}, ErrNotFound
	}
	if err != nil {
		return LinkAccess{}, err
	}
	la.Root = r
	return la, nil
}

// creatorShares checks that l's creator may still share its root as
// CreateLink let them: a link shares no more than its creator may, so
// once they may not (they left an organization share, or are no longer
// its MANAGER; they or their organization are disabled; the policy they
// act under no longer lets persons share, user_create_shares) it is as
// gone, and answers again if they regain it. secure is whether
// secure_shares now binds the link (in that policy or the root's), which
// makes it login_required whatever it was made with: a policy an
// organization above sets later reaches the links made before, or a
// child's persons' public links outlived a parent's withholding sharing.
//
// Errors: ErrNotFound; the store's.
func (s *Service) creatorShares(ctx context.Context, l Link) (secure bool, err error) {
	if s.accounts == nil {
		return false, nil
	}
	cr, err := s.accounts.Caller(ctx, l.CreatorID)
	if errors.Is(err, account.ErrNotFound) || errors.Is(err, account.ErrInactive) {
		return false, ErrNotFound
	}
	if err != nil {
		return false, err
	}
	a, err := s.Root(ctx, cr, l.RootID)
	switch {
	case errors.Is(err, ErrNoRoot), errors.Is(err, account.ErrInactive), errors.Is(err, vfs.ErrRootDeleted), errors.Is(err, vfs.ErrNotExist):
		return false, ErrNotFound
	case err != nil:
		return false, err
	case !a.Perms.Has(Reshare), !cr.Person.CanShare(cr.Organization.Policy):
		return false, ErrNotFound
	}
	return cr.Organization.Policy.SecureShares || a.Policy.SecureShares, nil
}

// subscribed reports whether c is a person or guest subscriber of l, an
// email subscriber by c's address who came by that subscriber's hash
// (via), or a member of a group subscriber (directly or through member
// groups).
func (s *Service) subscribed(ctx context.Context, l Link, c account.Caller, via string) bool {
	for _, sb := range l.Subscribers {
		if s.matches(ctx, sb, c, via) {
			return true
		}
	}
	return false
}

// matches reports whether subscriber entry sb admits c, who opened the
// link by subscriber hash via ("" for the link's own hash or id).
//
// An email entry admits c only by its own hash, and only when c's
// address is the entry's, compared as logins are (lower case): anyone
// sets their own address (to any no account holds) and none is
// verified, so the address on an account proves nothing, while the
// entry's hash is what was sent to the address. Matched by address
// alone, a person of any organization who set theirs to a subscriber's
// (or to "ſam@..." for "sam@...", another login that strings.EqualFold
// took for it) used every login_required link shared with that address.
func (s *Service) matches(ctx context.Context, sb Subscriber, c account.Caller, via string) bool {
	switch {
	case (sb.Kind == "person" || sb.Kind == "guest") && sb.SubjectID == c.Person.ID:
		return true
	case sb.Kind == "email":
		return via != "" && via == sb.Hash && sb.Email != "" && strings.ToLower(sb.Email) == strings.ToLower(c.Person.Email)
	case sb.Kind == "group" && s.accounts != nil:
		// A disabled group reaches nobody, as it reaches nobody
		// through an organization share's subscribers (groupActive):
		// disabling it cut its members off the shares but left them
		// every login_required link shared with it.
		in, err := s.accounts.InGroup(ctx, sb.SubjectID, c.Person.ID)
		if err != nil || !in {
			return false
		}
		active, err := s.groupActive(ctx, sb.SubjectID)
		return err == nil && active
	}
	return false
}

// CountDownload reserves one download of la's link before anything is
// streamed: in one transaction it checks download_limit and moves
// times_downloaded (the link's and the subscriber's). Concurrent
// reservations conflict and are run again, so the limit is never passed.
// etag names the content downloaded: under a limit, its resumptions are
// credited with it (CountRequest); "" credits nothing. A notice goes to
// the creator when download_notify is set.
//
// Errors: ErrDownloadLimit; ErrNotFound when the link was deleted.
func (s *Service) CountDownload(ctx context.Context, la LinkAccess, etag string) error {
	l, err := s.count(ctx, la, true, wholeDownload, etag)
	if err == nil && l.DownloadNotify {
		name := s.itemName(ctx, l)
		s.notice(ctx, l, fmt.Sprintf("%q was downloaded through your share link", name),
			fmt.Sprintf("%q was downloaded through your share link %s (link %d).\n", name, s.linkURL(l), l.ID))
	}
	return err
}

// CountRequest is the counting rule of a request for la's contents, the
// same for every front end (which reads sends and fromStart from the
// request: httpserve.Sends, and part, the bytes a resumption sends of the
// content's size: httpserve.RangeBytes). etag is the entity tag of the
// content served (a file's, a zip's: the same for the same bytes on
// every front end). An answer that sends nothing (HEAD, 304) counts
// nothing. One that sends the content from its start is a download (or,
// with view, a view) and is counted, reserved before a byte is sent.
// Without a download_limit a resumption counts nothing.
//
// Under a limit every answer that sends the content is charged to it
// before a byte goes out, and the returned Charge, settled with what the
// answer sent once it ends, gives back what it did not: a view is a
// download (the same bytes, inline), and what resumptions send draws on
// a balance (Link.Resumed) that each download counted credits with the
// content once, plus what a cut answer left unsent; past it, what they
// send holds a download of the limit from its first byte. The credit is
// for the content it was given for (Link.ResumedETag): a resumption of
// other content (another file of a folder link, a zip narrowed
// otherwise) first drops it and is then charged, so a download of a
// small item buys no free copy of a large one; a link keeps one
// content's credit at a time, so a download of other content, or what
// a cut answer for it gives back, drops it too. So a download cut and
// resumed any number of times counts once, while ranges that leave out
// the first byte (bytes=1-; a zip's is always "P"), or views, send at
// most twice the content per download allowed, whatever their mix or
// parallelism.
//
// Errors: those of CountDownload.
func (s *Service) CountRequest(ctx context.Context, la LinkAccess, view, sends, fromStart bool, etag string, part, size int64) (Charge, error) {
	limited := la.Link.DownloadLimit != nil
	if sends && !fromStart && size > 0 && part >= size {
		// Parts that add up to the content ("bytes=1-,1-"):
		// http.ServeContent sends it whole, 200, from its first byte.
		fromStart = true
	}
	switch {
	case !sends:
		return Charge{}, nil
	case !fromStart && !limited:
		return Charge{}, nil
	case !fromStart:
		share := resumedShare(part, size)
		if _, err := s.count(ctx, la, true, share, etag); err != nil {
			return Charge{}, err
		}
		return Charge{s: s, la: la, share: share, size: size, etag: etag}, nil
	case view && !limited:
		return Charge{}, s.CountView(ctx, la)
	}
	if err := s.CountDownload(ctx, la, etag); err != nil {
		return Charge{}, err
	}
	if !limited {
		return Charge{}, nil
	}
	return Charge{s: s, la: la, share: wholeDownload, size: size, etag: etag}, nil
}

// Charge is what CountRequest reserved of a link's download_limit for
// one answer; the zero Charge reserved nothing.
type Charge struct {
	s     *Service
	la    LinkAccess
	share int64 // millionths of a download
	size  int64 // the content's
	etag  string
}

// Reserved reports whether c holds a share of a link's download_limit,
// which Settle then settles.
func (c Charge) Reserved() bool { return c.s != nil }

// Settle gives back, once the answer has ended, the part of the charge
// it did not send (sent bytes of the content), to the link's balance of
// resumptions: a download cut on its way counts, but its resumptions
// then draw on what it left. What it gives back is credit for its own
// content: a credit for other content on the link is dropped first, as
// a resumption drops it. It errs low in what it gives back (sent is
// rounded up) and never lets a count go down; on a failure (returned)
// the charge stays whole, which only errs against the link's user.
func (c Charge) Settle(ctx context.Context, sent int64) error {
	if c.s == nil {
		return nil
	}
	back := c.share - resumedShare(sent, c.size)
	if back <= 0 {
		return nil
	}
	_, err := c.s.count(context.WithoutCancel(ctx), c.la, true, -back, c.etag)
	return err
}

// CountView moves times_viewed of la's link (and its subscriber's).
func (s *Service) CountView(ctx context.Context, la LinkAccess) error {
	_, err := s.count(ctx, la, false, 0, "")
	return err
}

// wholeDownload is one download in the millionths of Link.Resumed.
const wholeDownload = 1_000_000

// resumedShare is the share of a download that part bytes of content of
// size bytes are, in millionths, rounded up; at most one download (an
// answer whose ranges add up past the content is the whole content).
func resumedShare(part, size int64) int64 {
	if part <= 0 || size <= 0 {
		return 0
	}
	if part >= size {
		return wholeDownload
	}
	return int64(math.Ceil(float64(part) / float64(size) * wholeDownload))
}

// count moves la's link's counters, and its subscriber's: a view, or
// share millionths of a download (wholeDownload for a download) of the
// content etag names.
func (s *Service) count(ctx context.Context, la LinkAccess, download bool, share int64, etag string) (Link, error) {
	var out Link
	for try := 0; ; try++ {
		err := s.db.Update(ctx, func(tx kv.Txn) error {
			l, err := getLink(tx, la.Link.ID)
			if err != nil {
				return err
			}
			var downloads int64
			if download {
				// Resumed is a balance: a download credits one
				// resumption of it (-wholeDownload), resumptions
				// draw on it, what a charge did not send goes
				// back to it (share below 0: Charge.Settle), and
				// past it what they sent holds a download of the
				// limit until it adds up to one. The limit is used
				// up when what is held passes it, so a resumption
				// of the last download allowed still has its
				// credit.
				//
				// A credit is the content's it was given for
				// (ResumedETag): any move for other content drops
				// it first (a debt, above 0, stays: it holds the
				// limit whatever was sent), so a download of a
				// small zip or file is no free copy of a large one.
				// A credit stored without a tag (by a berth before
				// it kept one) goes, as it did then, to the first
				// content that moves it, and is that content's from
				// then on: the resumptions of downloads the upgrade
				// cut, above all of a link at its limit that can
				// take no new download, still go through, and what
				// stays open is the credit already earned, for one
				// content.
				base := l.Resumed
				if share != 0 && base < 0 && l.ResumedETag != "" && l.ResumedETag != etag {
					base = 0
				}
				resumed, whole := base+share, int64(0)
				if share == wholeDownload {
					resumed, whole = base, 1
				}
				held := whole
				if resumed > 0 {
					held += (resumed + wholeDownload - 1) / wholeDownload
				}
				if share > 0 && l.DownloadLimit != nil && l.TimesDownloaded+held > *l.DownloadLimit {
					return ErrDownloadLimit
				}
				if whole == 1 {
					resumed -= wholeDownload
				}
				downloads = whole
				if resumed > 0 {
					downloads, resumed = downloads+resumed/wholeDownload, resumed%wholeDownload
				}
				l.TimesDownloaded += downloads
				if l.DownloadLimit != nil && share != 0 {
					// Content without a tag earns no credit:
					// nothing could tell its resumptions apart.
					l.Resumed, l.ResumedETag = resumed, etag
					if resumed >= 0 || etag == "" {
						l.Resumed, l.ResumedETag = max(resumed, 0), ""
					}
				}
			} else {
				l.TimesViewed++
			}
			if la.Subscriber != nil {
				for i := range l.Subscribers {
					if sb := &l.Subscribers[i]; sb.ID == la.Subscriber.ID {
						if download {
							sb.TimesDownloaded += downloads
						} else {
							sb.TimesViewed++
						}
					}
				}
			}
			out = l
			return s.putLink(tx, l)
		})
		// Update retries conflicts a bounded number of times; a burst of
		// downloads of one link can outlast that, and each must still
		// get its exact answer.
		if errors.Is(err, kv.ErrConflict) && try < 1000 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
			continue
		}
		return out, err
	}
}

// CountUpload tells the creator of an upload through la's link when
// upload_notify is set.
func (s *Service) CountUpload(ctx context.Context, la LinkAccess, name string) {
	if la.Link.UploadNotify {
		s.notice(ctx, la.Link, fmt.Sprintf("%q was uploaded through your share link", name),
			fmt.Sprintf("%q was uploaded to %q through your share link %s (link %d).\n", name, s.itemName(ctx, la.Link), s.linkURL(la.Link), la.Link.ID))
	}
}

// itemName is the name of the file or folder l shares, for a notice: the
// creator must see which of their links was used without looking it up.
func (s *Service) itemName(ctx context.Context, l Link) string {
	n, err := s.fs.Stat(ctx, l.RootID, l.ItemID())
	if err != nil {
		return fmt.Sprintf("item %d", l.ItemID())
	}
	return n.Name
}

// linkURL is l's address as the REST API's url shows it when the public
// base URL is configured; without it, the path, which the creator's
// server completes.
func (s *Service) linkURL(l Link) string {
	return strings.TrimRight(s.publicURL, "/") + "/s/" + l.Hash
}

// notice sends the creator of l a notice, best effort.
func (s *Service) notice(ctx context.Context, l Link, subject, body string) {
	if s.notify == nil || s.accounts == nil {
		return
	}
	p, err := s.accounts.Person(ctx, l.CreatorID)
	if err != nil || p.Email == "" {
		return
	}
	s.mailFor(ctx, l, p.Email, subject, body)
}

// mailFor sends a mail of link l to to, best effort, from its creator's
// mail budget (mailbudget.go): past it, it is not sent, and the first
// refusal of the hour is logged.
func (s *Service) mailFor(ctx context.Context, l Link, to, subject, body string) {
	if ok, _, first := s.mail.Use(personSender(l.CreatorID), 1); !ok {
		if first {
			s.log.Warn("share link mails not sent: the creator's for this hour are used up", "person_id", l.CreatorID, "link_id", l.ID, "per_hour", s.mail.Max())
		}
		return
	}
	_ = s.notify.Notify(ctx, to, subject, body)
}

// LinkWrite returns the terms of a write through la's link by c (nil: no
// token): the link (or the subscriber's hash) must grant write access, and
// a user who is neither the creator nor a subscriber writes only with
// anon_edit. The write is made with the creator's access to the root:
// the limits and quotas of the root's policy (their own for their root;
// an organization share's organization's), and their name in the
// activity log. Locks hold the writer, not the creator: the principal
// is the creator's for the creator, a signed-in subscriber's own, and
// the link's (Link.Requester) for anyone else.
//
// Errors: ErrForbidden (a *Refusal) when the write is not allowed;
// account's errors reading the creator (an inactive creator is refused).
func (s *Service) LinkWrite(ctx context.Context, la LinkAccess, c *account.Caller) (Access, error) {
	if !la.Perms.Has(Write) {
		return Access{}, refuse("this share link does not allow writing")
	}
	member := c != nil && (c.Person.ID == la.Link.CreatorID || s.subscribed(ctx, la.Link, *c, la.via))
	if !member && !la.Link.AnonEdit {
		return Access{}, refuse("this share link allows writing only to its creator and subscribers (anon_edit is off)")
	}
	if s.accounts == nil {
		return Access{}, ErrNoLinks
	}
	cr, err := s.accounts.Caller(ctx, la.Link.CreatorID)
	if err != nil {
		return Access{}, refuse("the share link's creator can no longer write here")
	}
	// The creator's own access to the root: for an organization share,
	// its organization's policy and quotas, not the creator's.
	ca, err := s.Root(ctx, cr, la.Link.RootID)
	if err != nil || !ca.Perms.Has(Write) {
		return Access{}, refuse("the share link's creator can no longer write here")
	}
	// The creator's locks hold everyone else who writes through the
	// link: the write is the creator's in all but whose it is to a lock.
	// With the creator's principal, anyone holding an anon_edit link
	// wrote over a file its creator had locked against changes.
	// The activity log names who wrote, not whose root it is: the
	// creator and a subscriber as themselves, anyone else as a visitor
	// of the link (LinkVisitor), named when signed in but not indexed
	// under their own organization, whose administrators would then
	// read of a root they have no part in. Before, every write through
	// a link was logged as the creator's, so an anonymous upload read as
	// theirs.
	opts := ca.Opts
	switch {
	case c != nil && c.Person.ID == la.Link.CreatorID:
	case c != nil && member:
		opts.Principal = c.Person.Principal()
		opts.Actor = c.Actor()
	default:
		opts.Principal = la.Link.Requester()
		named := c
		if c != nil && !s.orgSees(ctx, cr.Person.OrganizationID, c.Person.OrganizationID) {
			// The record is in the lists of the creator's
			// organization: its administrators, and the creator,
			// read a person of an organization they may not see
			// as no one named (as hideActors in rest does).
			named = nil
		}
		opts.Actor = LinkVisitor(la.Link, cr.Person.OrganizationID, named)
	}
	return Access{Root: la.Root, Perms: la.Perms & ca.Perms, Policy: ca.Policy, Place: ca.Place, Opts: opts}, nil
}

// orgSees reports whether the administrators of organization org may
// read the people of organization other: other is org or one below it.
// An error reads as no: a name is left out rather than shown.
func (s *Service) orgSees(ctx context.Context, org, other uint64) bool {
	if org == other {
		return true
	}
	place, err := s.accounts.OrgPlaceOf(ctx, other)
	return err == nil && account.Within(place.Chain, org)
}

// LinkVisitor is the actor of a change made through link l (anon_edit)
// by c, who is neither its creator nor a subscriber (nil: not signed
// in, or not to be named): actor_type "sharelink", of org, the
// organization of the link's creator (whose administrators read it in
// their list), with no person; a signed-in visitor is named in the text.
func LinkVisitor(l Link, org uint64, c *account.Caller) account.Actor {
	text := fmt.Sprintf("a visitor of share link %d", l.ID)
	if c != nil {
		text = c.Actor().Text + ", " + text
	}
	return account.Actor{Type: "sharelink", Text: text, CompanyID: org}
}

// recordLink writes the activity record of a change to link l by c, in
// the change's transaction. The hash is left out: it is the link's key.
func (s *Service) recordLink(ctx context.Context, tx kv.Txn, act string, c account.Caller, l Link) error {
	if s.accounts == nil {
		return nil
	}
	return s.accounts.Record(ctx, tx, account.Change{
		Activity:    act,
		OnType:      "sharelink",
		OnText:      fmt.Sprintf("share link %d", l.ID),
		OnCompanyID: c.Person.OrganizationID,
		OnRootID:    l.RootID,
	})
}
