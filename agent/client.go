package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"
)

// APIError is an error answer of the server, in the API's form
// {error, error_description}, with its HTTP status.
type APIError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *APIError) Error() string {
	if e.Description == "" {
		return fmt.Sprintf("berth: %d %s", e.Status, e.Code)
	}
	return fmt.Sprintf("berth: %d %s: %s", e.Status, e.Code, e.Description)
}

// ClientID is the OAuth client_id the agent sends with its grants.
const ClientID = "anchor"

// ErrSignIn is a sign-in the server refused for good (wrong password, no
// two-step code, locked account): retrying the same credentials cannot
// help, so Run stops instead of backing off forever.
var ErrSignIn = errors.New("agent: sign-in refused")

// Client is an API client that signs the machine in and keeps its
// tokens fresh: the access token in memory, the rotating refresh token
// in the state file (saved before it is used, so a crash never leaves the
// agent holding only a spent one). Safe for concurrent use.
type Client struct {
	base   string
	http   *http.Client
	cfg    *Config
	mu     sync.Mutex
	st     State
	access string
	until  time.Time
}

// Base returns the server's URL, without a trailing slash.
func (c *Client) Base() string { return c.base }

// HTTP returns the underlying client (TLS trust of the server).
func (c *Client) HTTP() *http.Client { return c.http }

// State returns a copy of the agent's state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st
}

// Token returns a valid access token, refreshing or signing in as
// needed.
func (c *Client) Token(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.access != "" && time.Now().Before(c.until) {
		return c.access, nil
	}
	return c.renew(ctx)
}

// invalidate forgets access token tok after the server refused it, so the
// next Token renews it.
func (c *Client) invalidate(tok string) {
	c.mu.Lock()
	if c.access == tok {
		c.access = ""
	}
	c.mu.Unlock()
}

// renew gets a new access token with the refresh token, or by signing in
// with the password when there is none or the server refused it. c.mu is
// held.
func (c *Client) renew(ctx context.Context) (string, error) {
	if c.st.RefreshToken != "" {
		v := c.machineFields()
		v.Set("grant_type", "refresh_token")
		v.Set("refresh_token", c.st.RefreshToken)
		err := c.grant(ctx, v)
		if err == nil {
			return c.access, nil
		}
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status >= 500 {
			return "", err
		}
		// The session ended (expired, revoked, the machine deleted):
		// sign in again.
		c.st.RefreshToken = ""
	}
	if c.cfg.Password == nil {
		return "", fmt.Errorf("%w: the session ended and no password is configured", ErrSignIn)
	}
	pw, err := c.cfg.Password()
	if err != nil {
		return "", err
	}
	v := c.machineFields()
	v.Set("grant_type", "password")
	v.Set("username", c.cfg.Login)
	v.Set("password", pw)
	err = c.grant(ctx, v)
	var ae *APIError
	if errors.As(err, &ae) && (ae.Code == "missing_totp" || ae.Code == "invalid_totp") && c.cfg.TwoStepCode != nil {
		code, cerr := c.cfg.TwoStepCode(ctx)
		if cerr != nil {
			return "", cerr
		}
		v.Set("auth_code", code)
		err = c.grant(ctx, v)
	}
	if errors.As(err, &ae) && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
		return "", fmt.Errorf("%w: %v", ErrSignIn, err)
	}
	if err != nil {
		return "", err
	}
	return c.access, nil
}

// machineFields are spec 5.1's client fields: the GUID the server gave
// this machine, and what it is.
func (c *Client) machineFields() url.Values {
	// berth's one OAuth client (rest's oauthClientID): the agent signs
	// in as berth's own client, as the other apps do.
	v := url.Values{"client_id": {ClientID}}
	if c.st.GUID != "" {
		v.Set("guid", c.st.GUID)
	}
	host, _ := os.Hostname()
	v.Set("dns_name", host)
	v.Set("os_type", osType())
	v.Set("os_version", osVersion())
	return v
}

func osType() string {
	switch runtime.GOOS {
	case "windows":
		return "win"
	case "darwin":
		return "osx"
	}
	return runtime.GOOS
}

func osVersion() string {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return runtime.GOARCH
}

// grant posts a token request and keeps what it answers. c.mu is held.
func (c *Client) grant(ctx context.Context, v url.Values) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/oauth/token", strings.NewReader(v.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiError(resp)
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		GUID         string `json:"guid"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&tok); err != nil {
		return fmt.Errorf("agent: token answer: %w", err)
	}
	st := c.st
	st.RefreshToken = tok.RefreshToken
	if tok.GUID != "" {
		st.GUID = tok.GUID
	}
	if err := saveState(c.cfg.StateFile, st); err != nil {
		return err
	}
	c.st = st
	c.access = tok.AccessToken
	// Renew a little early, so a request is never sent with a token
	// about to lapse.
	c.until = time.Now().Add(time.Duration(tok.ExpiresIn)*time.Second*9/10 - time.Second)
	return nil
}

// setMachineID records the machine's id the server told the channel.
func (c *Client) setMachineID(id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.st.MachineID == id {
		return nil
	}
	st := c.st
	st.MachineID = id
	if err := saveState(c.cfg.StateFile, st); err != nil {
		return err
	}
	c.st = st
	return nil
}

// Do sends req with the access token. A 401 renews the token and sends
// req once more when its body can be sent again (GetBody). Error answers
// are returned as responses; the caller reads them with CheckResponse.
func (c *Client) Do(req *http.Request) (*http.Response, error) {
	for try := 0; ; try++ {
		tok, err := c.Token(req.Context())
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.http.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized || try > 0 || (req.Body != nil && req.GetBody == nil) {
			return resp, nil
		}
		resp.Body.Close()
		c.invalidate(tok)
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// CheckResponse returns nil for a 2xx or 304 response, and otherwise the
// APIError its body holds (closing it).
func CheckResponse(resp *http.Response) error {
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	defer resp.Body.Close()
	return apiError(resp)
}

func apiError(resp *http.Response) error {
	e := &APIError{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if json.Unmarshal(b, e) != nil || e.Code == "" {
		e.Code = http.StatusText(resp.StatusCode)
		e.Description = strings.TrimSpace(string(b))
	}
	return e
}

// GetJSON GETs path (under the server's URL) and decodes the answer into
// out.
func (c *Client) GetJSON(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	return c.doJSON(req, out)
}

// PostForm POSTs form fields to path and decodes the answer into out (nil:
// discarded).
func (c *Client) PostForm(ctx context.Context, path string, v url.Values, out any) error {
	body := v.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.doJSON(req, out)
}

// PostJSON POSTs v as a JSON body to path and decodes the answer into
// out (nil: discarded).
func (c *Client) PostJSON(ctx context.Context, path string, v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.doJSON(req, out)
}

func (c *Client) doJSON(req *http.Request, out any) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	if err := CheckResponse(resp); err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err := io.Copy(io.Discard, resp.Body)
		return err
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
