package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
)

// How `berth admin` prints answers: the API's JSON as it came with
// --json (for scripts and jq), else a readable table: an object as one
// field a line in the API's own order, a list as columns.

// kindMembers is a group's members object (four arrays of ids).
const kindMembers kind = "members"

// columns are the fields a list shows of each kind, with their headings.
var columns = map[kind][][2]string{
	kindOrg:    {{"id", "ID"}, {"parent_id", "PARENT"}, {"name", "NAME"}, {"active", "ACTIVE"}, {"email", "EMAIL"}},
	kindPerson: {{"id", "ID"}, {"username", "USERNAME"}, {"email", "EMAIL"}, {"display_name", "NAME"}, {"space_usage_formatted", "USED"}, {"space_quota_formatted", "QUOTA"}},
	kindGuest:  {{"id", "ID"}, {"email", "EMAIL"}, {"first_name", "FIRST"}, {"last_name", "LAST"}, {"active", "ACTIVE"}, {"creator_id", "CREATOR"}},
	kindGroup:  {{"id", "ID"}, {"name", "NAME"}, {"active", "ACTIVE"}, {"created", "CREATED"}},
}

// print shows one answer. done is what a route that answers only
// {status: ok} did, said in words.
func (a *adminCLI) print(raw json.RawMessage, k kind, done string) error {
	if a.jsonOut {
		return writeIndented(a, raw)
	}
	switch k {
	case kindStatus:
		_, err := fmt.Fprintln(a.io.out, done)
		return err
	case kindPolicy:
		var org struct {
			Policy json.RawMessage `json:"policy"`
		}
		if err := json.Unmarshal(raw, &org); err != nil || len(org.Policy) == 0 {
			return fmt.Errorf("the answer holds no policy")
		}
		raw = org.Policy
	}
	fs, err := orderedFields(raw)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(a.io.out, 0, 4, 2, ' ', 0)
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%s\n", f.key, cell(f.val))
	}
	return tw.Flush()
}

func writeIndented(a *adminCLI, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err := a.io.out.Write(b.Bytes())
	return err
}

// printList shows the results of a list; a footer on standard error says
// when more are there.
func (a *adminCLI) printList(offset int, results []json.RawMessage, total int, k kind) error {
	if a.jsonOut {
		env, err := json.Marshal(struct {
			Offset  int               `json:"offset"`
			Results []json.RawMessage `json:"results"`
			Total   int               `json:"total"`
		}{offset, append([]json.RawMessage{}, results...), total})
		if err != nil {
			return err
		}
		return writeIndented(a, env)
	}
	cols := columns[k]
	tw := tabwriter.NewWriter(a.io.out, 0, 4, 2, ' ', 0)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c[1]
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, r := range results {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(r, &obj); err != nil {
			return fmt.Errorf("a result is not an object: %w", err)
		}
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = cell(obj[c[0]])
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if end := offset + len(results); offset > 0 || end < total {
		fmt.Fprintf(a.io.errw, "%d to %d of %d (--offset, --limit, --all for more)\n", min(offset+1, end), end, total)
	}
	return nil
}

type jsonField struct {
	key string
	val json.RawMessage
}

// orderedFields are the members of a JSON object in the order the API
// wrote them, which is the spec's order of the object's fields.
func orderedFields(raw json.RawMessage) ([]jsonField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("the answer is not a JSON object")
	}
	var fs []jsonField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		fs = append(fs, jsonField{key: t.(string), val: v})
	}
	return fs, nil
}

// maxCellItems is how many ids of an array a cell lists before it only
// counts them.
const maxCellItems = 20

// cell is a JSON value as a table shows it: strings bare, null as -, a
// short array of scalars as a list, anything nested as a hint to --json.
func cell(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 || string(v) == "null" {
		return "-"
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			if s == "" {
				return "-"
			}
			return s
		}
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(v, &items) != nil {
			break
		}
		if len(items) == 0 {
			return "none"
		}
		if len(items) > maxCellItems || bytes.ContainsAny(v[1:], "[{") {
			if len(items) == 1 {
				return "1 item (--json shows it)"
			}
			return fmt.Sprintf("%d items (--json shows them)", len(items))
		}
		s := make([]string, len(items))
		for i, it := range items {
			s[i] = cell(it)
		}
		return strings.Join(s, ", ")
	case '{':
		return "{...} (--json shows it)"
	}
	return string(v)
}

// jsonNum prints a number decoded into any without an exponent.
func jsonNum(v any) string {
	if f, ok := v.(float64); ok {
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprint(v)
}
