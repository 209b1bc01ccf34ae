package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// s3Env is a working S3 configuration through the environment.
func s3Env() map[string]string {
	return map[string]string{
		"BERTH_STORAGE_BACKEND":     "s3",
		"BERTH_STORAGE_S3_ENDPOINT": "http://127.0.0.1:7070",
		"BERTH_STORAGE_S3_BUCKET":   "berth-chunks",
		EnvS3AccessKey:              "AKIDEXAMPLE",
		EnvS3SecretKey:              "wJalrXUtnFEMI",
	}
}

func TestStorageBackend(t *testing.T) {
	credFile := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(credFile, []byte("[default]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		edit  map[string]string // over s3Env; "" unsets
		want  []string          // substrings of the error; none: loads
		check func(t *testing.T, c Config)
	}{
		{name: "environment credentials", check: func(t *testing.T, c Config) {
			s := c.Storage.S3
			if c.Storage.Backend != "s3" || s.AccessKey != "AKIDEXAMPLE" || s.SecretKey != "wJalrXUtnFEMI" || s.Prefix != "chunks" || s.MaxRequests != 32 || s.PathStyle {
				t.Fatalf("loaded %+v", c.Storage)
			}
		}},
		{name: "credentials file", edit: map[string]string{EnvS3AccessKey: "", EnvS3SecretKey: "", "BERTH_STORAGE_S3_CREDENTIALS_FILE": credFile}, check: func(t *testing.T, c Config) {
			if c.Storage.S3.CredentialsFile != credFile || c.Storage.S3.AccessKey != "" {
				t.Fatalf("loaded %+v", c.Storage.S3)
			}
		}},
		{name: "file wins over environment", edit: map[string]string{"BERTH_STORAGE_S3_CREDENTIALS_FILE": credFile}, check: func(t *testing.T, c Config) {
			if c.Storage.S3.AccessKey != "" {
				t.Fatalf("environment keys read beside a credentials file: %+v", c.Storage.S3)
			}
		}},
		{name: "endpoint without scheme", edit: map[string]string{"BERTH_STORAGE_S3_ENDPOINT": "s3.eu-west-1.amazonaws.com"}},
		{name: "path style", edit: map[string]string{"BERTH_STORAGE_S3_PATH_STYLE": "true"}, check: func(t *testing.T, c Config) {
			if !c.Storage.S3.PathStyle {
				t.Fatal("path_style not read")
			}
		}},
		{name: "disk ignores s3 keys", edit: map[string]string{"BERTH_STORAGE_BACKEND": "disk", "BERTH_STORAGE_S3_BUCKET": "", EnvS3AccessKey: ""}, check: func(t *testing.T, c Config) {
			if c.Storage.S3.SecretKey != "" {
				t.Fatal("the disk backend read S3 secrets from the environment")
			}
		}},
		{name: "unknown backend", edit: map[string]string{"BERTH_STORAGE_BACKEND": "tape"}, want: []string{`storage.backend: "tape" is not disk or s3`}},
		{name: "missing bucket", edit: map[string]string{"BERTH_STORAGE_S3_BUCKET": ""}, want: []string{`storage.s3.bucket: "" must be set when storage.backend is s3`}},
		{name: "bad bucket", edit: map[string]string{"BERTH_STORAGE_S3_BUCKET": "Berth_Chunks"}, want: []string{`storage.s3.bucket: "Berth_Chunks" is not a bucket name`}},
		{name: "missing endpoint", edit: map[string]string{"BERTH_STORAGE_S3_ENDPOINT": ""}, want: []string{`storage.s3.endpoint: "" must be set`}},
		{name: "bad endpoint scheme", edit: map[string]string{"BERTH_STORAGE_S3_ENDPOINT": "ftp://s3.example.com"}, want: []string{`storage.s3.endpoint: "ftp://s3.example.com" is not an http:// or https:// URL`}},
		{name: "endpoint with a path", edit: map[string]string{"BERTH_STORAGE_S3_ENDPOINT": "https://s3.example.com/bucket"}, want: []string{`storage.s3.endpoint: "https://s3.example.com/bucket"`}},
		{name: "no credentials", edit: map[string]string{EnvS3AccessKey: "", EnvS3SecretKey: ""}, want: []string{"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not both set"}},
		{name: "secret only", edit: map[string]string{EnvS3AccessKey: ""}, want: []string{"berth has no S3 credentials"}},
		{name: "credentials file missing", edit: map[string]string{"BERTH_STORAGE_S3_CREDENTIALS_FILE": "/nonexistent/credentials"}, want: []string{`storage.s3.credentials_file: "/nonexistent/credentials" cannot be read`}},
		{name: "max requests", edit: map[string]string{"BERTH_STORAGE_S3_MAX_REQUESTS": "0"}, want: []string{`storage.s3.max_requests: "0" must be between 1 and 1024`}},
		{name: "parallelism", edit: map[string]string{"BERTH_STORAGE_S3_PARALLELISM": "65"}, want: []string{`storage.s3.parallelism: "65" must be between 1 and 64`}},
		{name: "prefix", edit: map[string]string{"BERTH_STORAGE_S3_PREFIX": "a//b"}, want: []string{`storage.s3.prefix: "a//b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := s3Env()
			for k, v := range tt.edit {
				env[k] = v
			}
			for k, v := range env {
				if v == "" && (k == EnvS3AccessKey || k == EnvS3SecretKey) {
					t.Setenv(k, "")
					os.Unsetenv(k)
					continue
				}
				t.Setenv(k, v)
			}
			c, err := load(t)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if tt.check != nil {
					tt.check(t, c)
				}
				return
			}
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "wJalrXUtnFEMI") {
				t.Errorf("error echoes the secret key: %v", err)
			}
		})
	}
}
