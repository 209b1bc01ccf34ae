package agent

import (
	"berth/atomicfile"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// State is what the agent keeps between runs in its state file: the
// machine it is (GUID, id) and the session it signed in (refresh token).
// The file is 0600: the refresh token signs the machine in.
type State struct {
	Server       string `json:"server"`
	Login        string `json:"login"`
	GUID         string `json:"guid,omitempty"`
	MachineID    uint64 `json:"machine_id,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
}

// loadState reads the state file; a missing file is an empty State.
func loadState(path string) (State, error) {
	var st State
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("agent: state file: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("agent: state file %s: %w", path, err)
	}
	return st, nil
}

// writePrivate writes b to path whole and durably (atomicfile), readable by
// the agent alone, making its folder first: every file the agent keeps
// (state, indexes, reports) lives in folders it may have to create.
func writePrivate(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o600)
}

// saveState writes st whole or not at all (atomicfile.WriteFile), so a crash
// leaves the old state or the new one and never a torn refresh token.
func saveState(path string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivate(path, b); err != nil {
		return fmt.Errorf("agent: state file: %w", err)
	}
	return nil
}
