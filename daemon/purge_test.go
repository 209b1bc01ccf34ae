package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth/config"
	"berth/vfs"
)

// TestPurgeDeletedCommand: purge-deleted on a stopped data directory
// purges what was deleted long enough ago and frees its chunks; it refuses
// to run without --older-than, so an operator never empties the trash by
// accident.
func TestPurgeDeletedCommand(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	cfg := config.Default()
	cfg.Data = data
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("trash "), 200_000) // chunked, not inline
	gone, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "gone.txt", bytes.NewReader(content), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "kept.txt", strings.NewReader("kept"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.files.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st.close(log)

	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{
		{"purge-deleted", "--data", data},
		{"purge-deleted", "--data", data, "--older-than", "-1h"},
	} {
		if err := run(ctx, args, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "--older-than") {
			t.Errorf("%v: %v, want an error naming --older-than", args, err)
		}
	}
	// Deleted a moment ago: not older than an hour.
	if err := run(ctx, []string{"purge-deleted", "--data", data, "--older-than", "1h"}, &stdout, &stderr); err != nil {
		t.Fatalf("purge-deleted: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "purged 0 deleted items") {
		t.Errorf("purge-deleted --older-than 1h printed %q", stdout.String())
	}
	stdout.Reset()
	if err := run(ctx, []string{"purge-deleted", "--data", data, "--older-than", "0s"}, &stdout, &stderr); err != nil {
		t.Fatalf("purge-deleted: %v\n%s", err, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "purged 1 deleted items") || strings.Contains(out, "removed 0") {
		t.Errorf("purge-deleted --older-than 0s printed %q", out)
	}
	stdout.Reset()
	if err := run(ctx, []string{"fsck", "--verify", "--data", data}, &stdout, &stderr); err != nil {
		t.Fatalf("fsck after purge-deleted: %v %s", err, stdout.String())
	}

	st, err = openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	if _, err := st.files.Stat(ctx, root.ID, gone.ID); err == nil {
		t.Error("the purged file is still there")
	}
	u, err := st.files.Usage(ctx, root.ID)
	if err != nil || u.DeletedSize != 0 || u.FileCount != 1 {
		t.Errorf("usage after the purge: %+v %v", u, err)
	}
	if _, err := st.files.Stat(ctx, root.ID, kept.ID); err != nil {
		t.Errorf("the live file: %v", err)
	}
}

// TestCollectorPurgesDeleted: with gc.purge_deleted_after set, the
// background collection purges what was deleted long enough ago and then
// frees its chunks, while the daemon runs.
func TestCollectorPurgesDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(log)
	root, err := st.files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := st.files.WriteFile(ctx, root.ID, root.FolderID, "gone.txt", bytes.NewReader(bytes.Repeat([]byte("trash "), 200_000)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.files.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // gone.txt is now older than 200ms

	done := make(chan struct{})
	go func() {
		defer close(done)
		collectGarbage(ctx, 10*time.Millisecond, time.Hour, st, log) // purges nothing yet
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if _, err := st.files.Stat(context.Background(), root.ID, gone.ID); err != nil {
		t.Fatalf("purged with purge_deleted_after 1h: %v", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	done = make(chan struct{})
	go func() {
		defer close(done)
		collectGarbage(ctx, 10*time.Millisecond, 200*time.Millisecond, st, log)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, goneErr := st.files.Stat(ctx, root.ID, gone.ID)
		rep, err := st.files.Fsck(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		if goneErr != nil && rep.Chunks == 0 && rep.OK() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: stat %v, fsck %s", goneErr, rep)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
}
