package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"berth/vfs"
)

// TestScripts runs scripts of vfs operations in the manner of
// golang.org/x/net/webdav's file_test.go: a line per operation, its
// arguments, and what it must answer, "ok" or "want" and the error's class
// (errors.Is, never the text). Each script runs on a fresh file system with
// one root. A bug in what an operation answers, found later, becomes a line
// here (or a new script), with its history in a "#" comment.
//
// Operations (FOLDER and ITEM are a path, @label, @label.top or #id;
// a name or body is a word or a Go-quoted string, "x"*N repeats it;
// a body rand:SEED:N is N random bytes):
//
//	mkdir FOLDER NAME              write FOLDER NAME BODY
//	rename ITEM NAME               move ITEM FOLDER [NAME]
//	copy ITEM FOLDER NAME          copy-empty ITEM FOLDER NAME
//	delete ITEM                    purge ITEM
//	stat ITEM                      lookup PATH
//	open ITEM                      open-path PATH
//	list FOLDER                    search QUERY
//	lock ITEM                      unlock ITEM TOKEN (@label or a word)
//	create-root NAME TYPE          delete-root ROOT
//
// Options: root=ROOT (the root an operation works in; @label or #id);
// principal=, token= (a lock's @label or a word); quota=, maxsize=,
// exclude=, ifrev=@label (the revision the label's write made; write,
// rename, move, delete, lock), ifabsent (write); overwrite (copy, copy-empty, move); owner=, holder=, deep,
// shared, tokenreq (lock); as=label names what the operation made or
// found. Checks on the node an operation returns: path=, dir=, size=,
// deleted=, id=@label; body= (open, open-path), file= (whether open-path
// gave a file), n= (list, search), first=@label (search).
func TestScripts(t *testing.T) {
	for _, sc := range []struct {
		name   string
		script string
	}{
		{"TreeOperations", `
			mkdir / a as=a ok
			mkdir @a b as=b ok
			write @b "héllo wörld.txt" hi as=f path="/a/b/héllo wörld.txt" ok
			# A rename carries the folder's children along.
			rename @b c ok
			lookup "/a/c/héllo wörld.txt" id=@f dir=false size=2 ok
			move @f / ok
			stat @f path="/héllo wörld.txt" ok
			copy @a / a2 path=/a2 ok
			lookup /a2/c ok
			# Search folds case and finds the moved file.
			search WÖRLD n=1 first=@f ok
			delete @a ok
			lookup /a want ErrNotExist
			stat @a deleted=true ok
			list / n=2 ok
			# The name is free again after delete.
			mkdir / a ok
		`},
		{"Errors", `
			mkdir / dir as=dir ok
			write / file.txt x as=file ok
			create-root bob share as=bob ok
			create-root gone backup as=gone ok
			delete-root @gone ok
			lock @file owner=x holder=carol as=lk ok
			# Names.
			write / "" "" want ErrInvalidName
			write / . "" want ErrInvalidName
			write / .. "" want ErrInvalidName
			write / a/b "" want ErrInvalidName
			write / "a\\b" "" want ErrInvalidName
			write / "a\x00b" "" want ErrInvalidName
			write / "a\nb" "" want ErrInvalidName
			write / "a\xffb" "" want ErrInvalidName
			# U+FFFE and U+FFFF are no characters and XML 1.0, which every
			# WebDAV answer is, cannot carry them: PROPFIND named such a file
			# with U+FFFD, a name REST did not give and no request found.
			write / "a\uFFFEb" "" want ErrInvalidName
			write / "a\uFFFFb" "" want ErrInvalidName
			write / "a\uFFFDb\uFDD0\U0010FFFF" "" ok
			write / "é"*128 "" want ErrNameTooLong
			# Names taken.
			write / dir "" want ErrNameConflict
			mkdir / file.txt want ErrNameConflict
			rename @dir file.txt want ErrNameConflict
			move @dir @dir want ErrNameConflict
			# Locks.
			write / file.txt y want ErrLocked
			delete @file want ErrLocked
			write / file.txt y token=urn:uuid:nope want ErrLocked
			lock @file want ErrLocked
			unlock @file urn:uuid:nope want ErrNoSuchLock
			# Roots and ids: a node of another root reveals nothing.
			stat @gone.top root=@gone want ErrRootDeleted
			stat #1 root=#999999 want ErrNotExist
			stat @file root=@bob want ErrNotExist
			stat #999999 want ErrNotExist
			# Kinds.
			write @file x x want ErrNotDir
			open @dir want ErrIsDir
			# Policy passed in.
			write / x.EXE y exclude=.exe want ErrExtensionExcluded
			write / big four maxsize=3 want ErrFileTooLarge
			write / big four! quota=4 want ErrQuotaExceeded
			delete / want ErrRootItem
			# The holder of a REST lock and the presenter of the token get through.
			write / file.txt z principal=carol ok
			write / file.txt z principal=carol token=@lk ok
			# Nothing refused stored anything.
			lookup /big want ErrNotExist
			unlock @file @lk ok
			write / file.txt free ok
		`},
		// IfRevision and IfAbsent hold at the commit, or nothing is stored
		// (was ifrevision_test.go, TestWriteIfRevision).
		{"WriteIfRevision", `
			write / a.txt v1 as=v1 ok
			write / a.txt v2 as=v2 ok
			# An old revision.
			write / a.txt x ifrev=@v1 want ErrChanged
			# Absent, but it exists.
			write / a.txt x ifabsent want ErrChanged
			# A revision of a missing file.
			write / b.txt x ifrev=@v1 want ErrChanged
			open @v2 body=v2 ok
			lookup /b.txt want ErrNotExist
			# The current revision; absent.
			write / a.txt v3 ifrev=@v2 as=v3 ok
			write / b.txt b ifabsent ok
			# Rename, move and delete of a file hold it too; a folder is
			# at no revision.
			mkdir / d as=d ok
			rename /a.txt c.txt ifrev=@v2 want ErrChanged
			move /a.txt @d ifrev=@v2 want ErrChanged
			delete /a.txt ifrev=@v2 want ErrChanged
			delete @d ifrev=@v3 want ErrChanged
			open /a.txt body=v3 ok
			rename /a.txt c.txt ifrev=@v3 ok
			move /c.txt @d ifrev=@v3 ok
			delete /d/c.txt ifrev=@v3 ok
			lookup /d/c.txt want ErrNotExist
			# A lock holds it too, and locks nothing when it fails.
			write / e.txt e1 as=e1 ok
			write / e.txt e2 as=e2 ok
			lock /e.txt ifrev=@e1 want ErrChanged
			lock @d ifrev=@e2 want ErrChanged
			write / e.txt e3 as=e3 ok
			lock /e.txt ifrev=@e2 want ErrChanged
			lock /e.txt ifrev=@e3 ok
		`},
		// A file opens with its bytes and node, a folder gives its node and
		// no file, and a missing, deleted or malformed path is the error
		// Lookup gives (was openpath_test.go, TestOpenPath).
		{"OpenPath", `
			mkdir / docs as=docs ok
			write @docs small.txt "small file" ok
			write @docs big.bin rand:7:3145728 as=big ok
			open-path /docs/small.txt body="small file" size=10 path=/docs/small.txt file=true ok
			open-path /docs/big.bin body=rand:7:3145728 size=3145728 path=/docs/big.bin file=true ok
			open-path /docs dir=true id=@docs file=false ok
			delete @big ok
			open-path /docs/big.bin want ErrNotExist
			open-path /docs/none want ErrNotExist
			open-path /docs/small.txt/x want ErrNotExist
			open-path /docs/../small.txt want ErrInvalidName
			open-path docs/small.txt want ErrInvalidName
		`},
		// A copy that would replace a locked item, or a folder holding
		// one, is refused whole, whether it copies a tree or one folder;
		// the lock's holder gets through. (Covered before only by chance,
		// by TestRaces and TestRandomOperations.)
		{"OverwriteLocked", `
			mkdir / src as=src ok
			write @src s x ok
			mkdir / dst as=dst ok
			write @dst f x as=f ok
			lock @f as=lkf ok
			mkdir / d2 as=d2 ok
			lock @d2 as=lk2 ok
			copy @src / dst overwrite want ErrLocked
			copy @src / d2 overwrite want ErrLocked
			copy-empty @src / d2 overwrite want ErrLocked
			lookup /dst/f id=@f ok
			lookup /d2 id=@d2 ok
			copy-empty @src / d2 overwrite token=@lk2 dir=true path=/d2 ok
			lookup /d2/s want ErrNotExist
			copy @src / dst overwrite token=@lkf path=/dst ok
			lookup /dst/s ok
			lookup /dst/f want ErrNotExist
		`},
		// Copy, CopyEmpty and Move check the new name and the kind of
		// what they copy before they touch anything.
		{"CopyMoveErrors", `
			mkdir / dir as=dir ok
			write / file.txt x as=file ok
			copy @dir / a/b want ErrInvalidName
			copy-empty @dir / "" want ErrInvalidName
			copy-empty @file / file2 want ErrNotDir
			move @file @dir a/b want ErrInvalidName
			lookup /file2 want ErrNotExist
			lookup /dir/file.txt want ErrNotExist
		`},
	} {
		t.Run(sc.name, func(t *testing.T) {
			runScript(t, newEnv(t), sc.script)
		})
	}
}

// scriptErrs names the errors a script line may want.
var scriptErrs = map[string]error{
	"ErrNotExist": vfs.ErrNotExist, "ErrNameConflict": vfs.ErrNameConflict, "ErrLocked": vfs.ErrLocked,
	"ErrRootDeleted": vfs.ErrRootDeleted, "ErrInvalidName": vfs.ErrInvalidName, "ErrNameTooLong": vfs.ErrNameTooLong,
	"ErrNotDir": vfs.ErrNotDir, "ErrIsDir": vfs.ErrIsDir, "ErrExtensionExcluded": vfs.ErrExtensionExcluded,
	"ErrFileTooLarge": vfs.ErrFileTooLarge, "ErrQuotaExceeded": vfs.ErrQuotaExceeded, "ErrNoSuchLock": vfs.ErrNoSuchLock,
	"ErrChanged": vfs.ErrChanged, "ErrBusy": vfs.ErrBusy, "ErrRootItem": vfs.ErrRootItem, "ErrNoSpace": vfs.ErrNoSpace,
	"ErrMetadataLimit": vfs.ErrMetadataLimit, "ErrTooDeep": vfs.ErrTooDeep,
}

// scriptKeys are the words a key=value token may start with; any other
// token is positional.
var scriptKeys = map[string]bool{
	"root": true, "principal": true, "token": true, "quota": true, "maxsize": true, "exclude": true,
	"owner": true, "holder": true, "as": true, "path": true, "dir": true, "size": true,
	"deleted": true, "id": true, "body": true, "n": true, "first": true, "ifrev": true, "file": true,
}

// scriptLine is one parsed line: its operation, positional arguments,
// key=value options and flags, and the error class it wants (nil: ok).
type scriptLine struct {
	op   string
	args []string
	kv   map[string]string
	want error
}

// tokens splits a line into words and Go-quoted strings; quoted reports
// which were quoted, so "a=b" in quotes stays a positional argument.
func tokens(t *testing.T, line string) (words []string, quoted []bool) {
	t.Helper()
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimLeftFunc(line, unicode.IsSpace) {
		end := strings.IndexFunc(line, unicode.IsSpace)
		if end < 0 {
			end = len(line)
		}
		if eq := strings.Index(line[:end], "=\""); eq > 0 && line[0] != '"' {
			// key="quoted value"
			q, err := strconv.QuotedPrefix(line[eq+1:])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			v, _ := strconv.Unquote(q)
			words, quoted = append(words, line[:eq+1]+v), append(quoted, false)
			line = line[eq+1+len(q):]
			continue
		}
		if line[0] != '"' {
			words, quoted = append(words, line[:end]), append(quoted, false)
			line = line[end:]
			continue
		}
		q, err := strconv.QuotedPrefix(line)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		rest := line[len(q):]
		word, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if times, ok := strings.CutPrefix(rest, "*"); ok {
			digits := strings.IndexFunc(times+" ", func(r rune) bool { return r < '0' || r > '9' })
			n, err := strconv.Atoi(times[:digits])
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			word, rest = strings.Repeat(word, n), times[digits:]
		}
		words, quoted = append(words, word), append(quoted, true)
		line = rest
	}
	return words, quoted
}

func parseLine(t *testing.T, line string) scriptLine {
	t.Helper()
	words, quoted := tokens(t, line)
	var l scriptLine
	switch n := len(words); {
	case n >= 2 && words[n-1] == "ok" && !quoted[n-1]:
		words = words[:n-1]
	case n >= 3 && words[n-2] == "want" && !quoted[n-2]:
		var ok bool
		if l.want, ok = scriptErrs[words[n-1]]; !ok {
			t.Fatalf("%q: unknown error %s", line, words[n-1])
		}
		words = words[:n-2]
	default:
		t.Fatalf("%q: a line ends with ok or want ErrX", line)
	}
	l.op, l.kv = words[0], map[string]string{}
	for i, w := range words[1:] {
		k, v, ok := strings.Cut(w, "=")
		switch {
		case !quoted[i+1] && ok && scriptKeys[k]:
			l.kv[k] = v
		case !quoted[i+1] && (w == "deep" || w == "shared" || w == "tokenreq" || w == "ifabsent" || w == "overwrite"):
			l.kv[w] = "true"
		default:
			l.args = append(l.args, w)
		}
	}
	return l
}

// script is the state of one running script: what its labels name.
type script struct {
	t      *testing.T
	e      *env
	ids    map[string]uint64 // @label -> node id
	revs   map[string]uint64 // @label -> the revision its write made
	roots  map[string]uint64 // @label -> root id
	tokens map[string]string // @label -> lock token
}

func runScript(t *testing.T, e *env, text string) {
	s := &script{t: t, e: e, ids: map[string]uint64{}, revs: map[string]uint64{}, roots: map[string]uint64{}, tokens: map[string]string{}}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s.run(i+1, line, parseLine(t, line))
	}
}

// root is the root a line works in.
func (s *script) root(l scriptLine) uint64 {
	r, ok := l.kv["root"]
	if !ok {
		return s.e.root.ID
	}
	return s.ref(r, s.roots, "root")
}

// ref resolves a #id or an @label of m.
func (s *script) ref(w string, m map[string]uint64, what string) uint64 {
	s.t.Helper()
	if id, ok := strings.CutPrefix(w, "#"); ok {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			s.t.Fatalf("%s %q: %v", what, w, err)
		}
		return n
	}
	id, ok := m[strings.TrimPrefix(w, "@")]
	if !strings.HasPrefix(w, "@") || !ok {
		s.t.Fatalf("no %s %q", what, w)
	}
	return id
}

// item resolves an item: #id, @label, or a path looked up now.
func (s *script) item(root uint64, w string) uint64 {
	s.t.Helper()
	if w[0] == '#' || w[0] == '@' {
		return s.ref(w, s.ids, "item")
	}
	n, err := s.e.fs.Lookup(ctx, root, w)
	if err != nil {
		s.t.Fatalf("lookup %s: %v", w, err)
	}
	return n.ID
}

// token resolves a lock token: @label, or the word itself.
func (s *script) token(w string) string {
	if tok, ok := s.tokens[strings.TrimPrefix(w, "@")]; ok && strings.HasPrefix(w, "@") {
		return tok
	}
	return w
}

func (s *script) opts(l scriptLine) vfs.WriteOptions {
	var o vfs.WriteOptions
	o.Principal = l.kv["principal"]
	if tok, ok := l.kv["token"]; ok {
		o.LockTokens = []string{s.token(tok)}
	}
	if ext, ok := l.kv["exclude"]; ok {
		o.ExcludedExtensions = strings.Split(ext, ",")
	}
	if rev, ok := l.kv["ifrev"]; ok {
		o.IfRevision = s.ref(rev, s.revs, "revision")
	}
	o.IfAbsent = l.kv["ifabsent"] != ""
	o.Overwrite = l.kv["overwrite"] != ""
	o.SpaceQuota, _ = strconv.ParseInt(l.kv["quota"], 10, 64)
	o.MaxFileSize, _ = strconv.ParseInt(l.kv["maxsize"], 10, 64)
	return o
}

// body is the bytes a body word stands for: rand:SEED:N, or the word.
func (s *script) body(w string) []byte {
	spec, ok := strings.CutPrefix(w, "rand:")
	if !ok {
		return []byte(w)
	}
	seed, n, _ := strings.Cut(spec, ":")
	sd, err1 := strconv.ParseUint(seed, 10, 64)
	size, err2 := strconv.Atoi(n)
	if err := errors.Join(err1, err2); err != nil {
		s.t.Fatalf("body %q: %v", w, err)
	}
	return randBytes(sd, size)
}

func (s *script) arg(no int, line string, l scriptLine, i int) string {
	if i >= len(l.args) {
		s.t.Fatalf("line %d %q: %s wants more arguments", no, line, l.op)
	}
	return l.args[i]
}

// run runs one line and checks what it answered.
func (s *script) run(no int, line string, l scriptLine) {
	t, fs := s.t, s.e.fs
	root := s.root(l)
	arg := func(i int) string { return s.arg(no, line, l, i) }
	var (
		node  *vfs.Node
		nodes []vfs.Node
		body  []byte
		file  *bool
		err   error
	)
	got := func(n vfs.Node, e error) { node, err = &n, e }
	switch l.op {
	case "mkdir":
		got(fs.Mkdir(ctx, root, s.item(root, arg(0)), arg(1), s.opts(l)))
	case "write":
		got(fs.WriteFile(ctx, root, s.item(root, arg(0)), arg(1), bytes.NewReader(s.body(arg(2))), s.opts(l)))
	case "rename":
		got(fs.Rename(ctx, root, s.item(root, arg(0)), arg(1), s.opts(l)))
	case "move":
		name := ""
		if len(l.args) > 2 {
			name = l.args[2]
		}
		got(fs.Move(ctx, root, s.item(root, arg(0)), s.item(root, arg(1)), name, s.opts(l)))
	case "copy":
		got(fs.Copy(ctx, root, s.item(root, arg(0)), root, s.item(root, arg(1)), arg(2), s.opts(l)))
	case "copy-empty":
		got(fs.CopyEmpty(ctx, root, s.item(root, arg(0)), root, s.item(root, arg(1)), arg(2), s.opts(l)))
	case "delete":
		err = fs.Delete(ctx, root, s.item(root, arg(0)), s.opts(l))
	case "purge":
		err = fs.Purge(ctx, root, s.item(root, arg(0)))
	case "stat":
		got(fs.Stat(ctx, root, s.item(root, arg(0))))
	case "lookup":
		got(fs.Lookup(ctx, root, arg(0)))
	case "open":
		var f *vfs.File
		if f, err = fs.Open(ctx, root, s.item(root, arg(0))); err == nil {
			body, err = io.ReadAll(f)
			f.Close()
		}
	case "open-path":
		n, f, e := fs.OpenPath(ctx, root, arg(0))
		node, err, file = &n, e, new(f != nil)
		if f != nil {
			if f.Node.ID != n.ID {
				t.Errorf("line %d %q: the file's node is %d, the node %d", no, line, f.Node.ID, n.ID)
			}
			body, err = io.ReadAll(f)
			f.Close()
		}
		if e != nil && f != nil {
			t.Errorf("line %d %q: a file with the error %v", no, line, e)
		}
	case "list":
		nodes, _, err = fs.List(ctx, root, s.item(root, arg(0)))
	case "search":
		nodes, err = fs.Search(ctx, root, arg(0), 0)
	case "lock":
		var lk vfs.Lock
		lk, err = fs.Lock(ctx, root, s.item(root, arg(0)), vfs.LockRequest{
			Owner: l.kv["owner"], Holder: l.kv["holder"],
			Deep: l.kv["deep"] != "", Shared: l.kv["shared"] != "", TokenRequired: l.kv["tokenreq"] != "",
			IfRevision: s.opts(l).IfRevision,
		})
		if as := l.kv["as"]; as != "" && err == nil {
			s.tokens[as] = lk.Token
		}
	case "unlock":
		err = fs.Unlock(ctx, root, s.item(root, arg(0)), s.token(arg(1)))
	case "create-root":
		var r vfs.Root
		if r, err = fs.CreateRoot(ctx, arg(0), vfs.RootType(arg(1))); err == nil && l.kv["as"] != "" {
			s.roots[l.kv["as"]], s.ids[l.kv["as"]+".top"] = r.ID, r.FolderID
		}
	case "delete-root":
		err = fs.DeleteRoot(ctx, s.ref(arg(0), s.roots, "root"))
	default:
		t.Fatalf("line %d %q: unknown operation %s", no, line, l.op)
	}
	if l.want != nil {
		if !errors.Is(err, l.want) {
			t.Errorf("line %d %q: got %v, want %v", no, line, err, l.want)
		}
		return
	}
	if err != nil {
		t.Fatalf("line %d %q: %v", no, line, err)
	}
	if as := l.kv["as"]; as != "" && node != nil {
		s.ids[as], s.revs[as] = node.ID, node.RevisionID
	}
	s.check(no, line, l, node, nodes, body, file)
}

// check compares what a line's operation returned with its checks.
func (s *script) check(no int, line string, l scriptLine, node *vfs.Node, nodes []vfs.Node, body []byte, file *bool) {
	t := s.t
	for k, want := range l.kv {
		var got string
		switch k {
		case "path", "dir", "size", "deleted", "id":
			if node == nil {
				t.Fatalf("line %d %q: %s gives no node to check", no, line, l.op)
			}
			switch k {
			case "path":
				got = node.Path
			case "dir":
				got = strconv.FormatBool(node.Dir)
			case "size":
				got = strconv.FormatInt(node.Size, 10)
			case "deleted":
				got = strconv.FormatBool(node.Deleted)
			case "id":
				got, want = strconv.FormatUint(node.ID, 10), strconv.FormatUint(s.ref(want, s.ids, "item"), 10)
			}
		case "body":
			if w := s.body(want); !bytes.Equal(body, w) {
				t.Errorf("line %d %q: body %.40q (%d bytes), want %.40q (%d bytes)", no, line, body, len(body), w, len(w))
			}
			continue
		case "file":
			if file == nil {
				t.Fatalf("line %d %q: %s gives no file to check", no, line, l.op)
			}
			got = strconv.FormatBool(*file)
		case "n":
			got = strconv.Itoa(len(nodes))
		case "first":
			if len(nodes) == 0 {
				t.Errorf("line %d %q: no first of none", no, line)
				continue
			}
			got, want = strconv.FormatUint(nodes[0].ID, 10), strconv.FormatUint(s.ref(want, s.ids, "item"), 10)
		default:
			continue
		}
		if got != want {
			t.Errorf("line %d %q: %s is %q, want %q (%+v)", no, line, k, got, want, node)
		}
	}
}
