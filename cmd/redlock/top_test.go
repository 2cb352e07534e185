//go:build unix

package main

// Tests of redlock top against real nodes: discovery, snapshots, JSON, the glob matcher.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// TestRealRedisGlobMatchesRedis: redisGlob agrees with a real server's KEYS on keys and
// patterns with every construct: stars, '?', sets, negated sets, ranges (reversed, with
// bytes above 0x7f), escapes, unclosed sets, '/'.
func TestRealRedisGlobMatchesRedis(t *testing.T) {
	cluster := redisproc.StartT(t, 1, redisproc.Config{})
	rc := redis.NewClient(&redis.Options{Addr: cluster.Addrs()[0]})
	defer rc.Close()
	keys := []string{"a", "b", "ab", "abc", "a/b", "jobs/nightly", "jobs:nightly", "x*y", "x?y", "x[y", "x]y", "x\\y", "xy",
		"{user1}:lock", "a}b", "\x00", "\x1b[2J", "é", "\xff", "\x80z", "-", "^", "aaaaaaaaaaaaaaaaaaaab", "[", "]"}
	patterns := []string{"*", "a*", "*b", "a?", "?", "??", "a*b*c", "jobs/*", "jobs?nightly", "[ab]", "[^ab]", "[a-b]", "[b-a]",
		"[\x80-\xff]*", "[a-\xff]", "[\xff-a]*", "[\x7f-\x80]*", "[\x00-z]", "x\\*y", "x\\?y", "x[[]y", "x[]]y", "x\\\\y", "x[\\]]y", "[", "x[y", "x[", "a[", "[^",
		"*a*a*a*a*a*a*a*c", "{*}*", "*}*", "\\", "a\\", "[-]", "[a-]", "[\\-]", "***", "*?", "?*?", "[!a]", "[^]]"}
	for _, k := range keys {
		if err := rc.Set(t.Context(), k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range patterns {
		want, err := rc.Keys(t.Context(), p).Result()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, k := range keys {
			if redisGlob(p, k) {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("pattern %q: redisGlob matches %q, Redis %q", p, got, want)
		}
	}
}

// topJSON runs top --once --json with args and decodes its one document.
func topJSON(t *testing.T, wantCode int, args ...string) (topDoc, string) {
	t.Helper()
	code, out, errOut := runBin(t, nil, append([]string{"top", "--once", "--json"}, args...)...)
	if code != wantCode {
		t.Fatalf("top %v: exit code %d, want %d; stderr %q", args, code, wantCode, errOut)
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("top --once --json printed %d lines, want one document on one line:\n%s", strings.Count(out, "\n"), out)
	}
	var doc topDoc
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("top --json output does not decode: %v\n%s", err, out)
	}
	return doc, out + errOut
}

// locksOf returns the keys of the locks a document lists, in its order.
func locksOf(doc topDoc) []string {
	var keys []string
	for _, l := range doc.Locks {
		keys = append(keys, l.Key)
	}
	return keys
}

func lockByKey(doc topDoc, key string) (topLockDoc, bool) {
	for _, l := range doc.Locks {
		if l.Key == key {
			return l, true
		}
	}
	return topLockDoc{}, false
}

// topTestPassword is the password of the ACL user that the top tests give in node URLs; no
// output may show it.
const topTestPassword = "T0pSecretPW"

// startAuthCluster starts n nodes with an ACL user "op" whose password is topTestPassword,
// and returns them, a --nodes value with the password in every URL, and library clients
// (the default user, no password) for setting the scene.
func startAuthCluster(t *testing.T, n int) (*redisproc.Cluster, string, []redis.UniversalClient) {
	t.Helper()
	cluster := redisproc.StartT(t, n, redisproc.Config{ExtraArgs: []string{"--user", "op", "on", ">" + topTestPassword, "~*", "&*", "+@all"}})
	var urls []string
	var clients []redis.UniversalClient
	for _, a := range cluster.Addrs() {
		urls = append(urls, "redis://op:"+topTestPassword+"@"+a)
		clients = append(clients, redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1}))
	}
	t.Cleanup(func() { closeClients(clients) })
	return cluster, strings.Join(urls, ","), clients
}

// TestRealTopFindsLocks holds locks of every key shape through the library (fenced with the
// default slot layout, and one WithoutFencing), makes two disagreements by writing holder ids
// on nodes directly, adds keys that are not locks, and checks what top --once --json and the
// table say about them, against the locks' own ids and tokens. --all shows a free lock of the
// key layout (its per-key counter is left) but cannot show one of the slot layout.
func TestRealTopFindsLocks(t *testing.T) {
	t.Parallel()
	_, nodes, clients := startAuthCluster(t, 5)
	ctx := ctxT(t, time.Minute)
	lc, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ctlKey := "ctl\x1b[2J\nkey"
	longKey := strings.Repeat("long-", 30)
	held := []string{"jobs/nightly", "{user1}:lock", "a}b", ctlKey, longKey, "split"}
	locks := map[string]*redlock.Lock{}
	for _, k := range held {
		l, err := lc.TryAcquire(ctx, k, time.Minute)
		if err != nil {
			t.Fatalf("acquire %q: %v", k, err)
		}
		locks[k] = l
	}
	gone, err := lc.TryAcquire(ctx, "gone", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Release(ctx); err != nil {
		t.Fatal(err)
	}
	keyLayout, err := redlock.New(clients, redlock.WithCounterLayout(redlock.KeyCounters))
	if err != nil {
		t.Fatal(err)
	}
	defer keyLayout.Close()
	goneKey, err := keyLayout.TryAcquire(ctx, "gone-key", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	goneKeyToken := goneKey.Token()
	if err := goneKey.Release(ctx); err != nil {
		t.Fatal(err)
	}
	unfenced, err := redlock.New(clients, redlock.WithoutFencing())
	if err != nil {
		t.Fatal(err)
	}
	defer unfenced.Close()
	nofence, err := unfenced.TryAcquire(ctx, "nofence", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// The nodes disagree: node 4 holds "split" for someone else; "lonely" has a key (and a
	// counter) on node 0 only.
	const other = "0123456789abcdef0123456789abcdef"
	if err := clients[4].Set(ctx, "split", other, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clients[0].Set(ctx, "lonely", other, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := clients[0].Set(ctx, redlock.FencePrefix+"{lonely}", 7, 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Not locks: a holder id without a TTL, other values with one, a hash, and the library's
	// own keys holding a holder id.
	for _, kv := range []struct {
		key, value string
		ttl        time.Duration
	}{
		{"persistent", other, 0}, {"cache", "hello", time.Minute}, {"upper", strings.ToUpper(other), time.Minute},
		{"short", other[:31], time.Minute}, {redlock.HighestTokenPrefix + "{data}", other, time.Minute},
		{redlock.SlotCounterPrefix + "{not a slot tag}", other, time.Minute},
	} {
		for _, c := range clients {
			if err := c.Set(ctx, kv.key, kv.value, kv.ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range clients {
		if err := c.HSet(ctx, "hash", "f", other).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Expire(ctx, "hash", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}

	before := time.Now().UnixMicro()
	doc, raw := topJSON(t, exitOK, "--nodes", nodes)
	after := time.Now().UnixMicro()
	if doc.Quorum != 3 || doc.Total != 5 || doc.Answered != 5 || doc.Truncated || doc.HiddenFree != 1 || doc.Found != len(held)+3 {
		t.Errorf("summary: quorum %d, total %d, answered %d, truncated %v, hidden_free %d, found %d; want 3, 5, 5, false, 1 (gone-key), %d",
			doc.Quorum, doc.Total, doc.Answered, doc.Truncated, doc.HiddenFree, doc.Found, len(held)+3)
	}
	var keys []string
	for _, l := range doc.Locks {
		keys = append(keys, l.Key)
	}
	wantKeys := append(slices.Clone(held), "lonely", "nofence")
	slices.Sort(wantKeys)
	if !slices.Equal(keys, wantKeys) {
		t.Errorf("locks shown %q, want %q (sorted; not the free \"gone\" and \"gone-key\", nor keys that are not locks)", keys, wantKeys)
	}
	for _, k := range held {
		l, ok := lockByKey(doc, k)
		lk := locks[k]
		wantOn, wantDisagree := 5, false
		if k == "split" {
			wantOn, wantDisagree = 4, true
		}
		if !ok || l.State != "held" || !l.Quorum || l.Holder != lk.ID() || l.HolderNodes != wantOn || l.Disagree != wantDisagree ||
			l.TTLMillis <= 0 || l.TTLMillis > 60000 || len(l.Nodes) != 5 {
			t.Errorf("lock %q: %+v; want held by %s on %d nodes, disagree %v", k, l, lk.ID(), wantOn, wantDisagree)
			continue
		}
		checkNextToken(t, "lock "+strconv.Quote(k), l.NextTokenAtLeast, uint64(lk.Token()), before, after)
		for i, n := range l.Nodes {
			wantHolder := lk.ID()
			if k == "split" && i == 4 {
				wantHolder = other
			}
			// Each of these keys is alone in its hash slot, so its slot counter is its token.
			if !n.Answered || n.Holder != wantHolder || n.Counter != uint64(lk.Token()) || n.SlotCounter != uint64(lk.Token()) ||
				n.KeyCounter != 0 || n.TTLMillis <= 0 {
				t.Errorf("lock %q node %d: %+v; want holder %s, slot counter %d, no key counter", k, i, n, wantHolder, lk.Token())
			}
		}
	}
	if l, _ := lockByKey(doc, "lonely"); l.State != "partial" || !l.Disagree || l.Quorum || l.Holder != other || l.HolderNodes != 1 || l.Nodes[0].KeyCounter != 7 {
		t.Errorf("lonely: %+v; want partial, disagree, holder %s on 1 node, key counter 7 on node 0", l, other)
	}
	if l, _ := lockByKey(doc, "nofence"); l.State != "held" || l.Holder != nofence.ID() || l.HolderNodes != 5 || l.Disagree || nofence.Token() != 0 {
		t.Errorf("nofence: %+v; want held by %s (token %d) on 5 nodes", l, nofence.ID(), nofence.Token())
	} else {
		for i, n := range l.Nodes {
			if n.Counter != 0 || n.SlotCounter != 0 || n.KeyCounter != 0 {
				t.Errorf("nofence node %d: %+v; want no counters", i, n)
			}
		}
	}
	if l, _ := lockByKey(doc, ctlKey); l.KeyBase64 != jsonBase64(ctlKey) {
		t.Errorf("key_base64 of %q: %q", ctlKey, l.KeyBase64)
	}
	if strings.Contains(raw, topTestPassword) || strings.ContainsRune(raw, 0x1b) {
		t.Errorf("top --json shows the password or a raw ESC:\n%s", raw)
	}

	// --all shows the free lock of the key layout, not the one of the slot layout; with
	// --counter-layout key the next token is the key counter's next. --match and --limit narrow.
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--all", "--counter-layout", "key")
	if l, ok := lockByKey(doc, "gone-key"); !ok || l.State != "free" || l.Disagree || l.Holder != "" || l.NextTokenAtLeast != uint64(goneKeyToken)+1 ||
		doc.HiddenFree != 0 || len(l.Nodes) != 5 || l.Nodes[0].KeyCounter != uint64(goneKeyToken) {
		t.Errorf("--all: gone-key is %+v (found %v), hidden_free %d; want free, next token %d", l, ok, doc.HiddenFree, goneKeyToken+1)
	}
	if l, ok := lockByKey(doc, "gone"); ok || len(doc.Locks) != len(wantKeys)+1 {
		t.Errorf("--all: %d locks, gone %+v; want %d, and the free lock of the slot layout not found", len(doc.Locks), l, len(wantKeys)+1)
	}
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--match", "jobs/*")
	if len(doc.Locks) != 1 || doc.Locks[0].Key != "jobs/nightly" || doc.Found != 1 {
		t.Errorf("--match jobs/*: found %d, locks %+v", doc.Found, doc.Locks)
	}
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--match", "*o?e*", "--all")
	if keys := locksOf(doc); !slices.Equal(keys, []string{"gone-key", "lonely", "nofence"}) || doc.Found != 3 {
		t.Errorf("--match *o?e* --all: found %d, locks %q; want gone-key (from its counter), lonely, nofence", doc.Found, keys)
	}
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--limit", "2", "--all")
	if !doc.Truncated || len(doc.Locks) > 2 || doc.Nodes[1].Examined != 2 || !doc.Nodes[1].Truncated {
		t.Errorf("--limit 2: truncated %v, %d locks, node 1 %+v", doc.Truncated, len(doc.Locks), doc.Nodes[1])
	}

	// The table: keys quoted and shortened, disagreements marked, no password, no raw ESC.
	code, out, errOut := runBin(t, nil, "top", "--nodes", nodes) // stdout is not a terminal: one snapshot
	if code != exitOK || errOut != "" {
		t.Fatalf("top: exit code %d, stderr %q", code, errOut)
	}
	if strings.Contains(out, topTestPassword) || strings.ContainsRune(out, 0x1b) || strings.Contains(out, "\x1b[2J") {
		t.Errorf("table shows the password or a raw ESC:\n%s", out)
	}
	rows := map[string]string{}
	for line := range strings.Lines(out) {
		for _, k := range wantKeys {
			if strings.Contains(line, displayKey(k)) {
				rows[k] = line
			}
		}
	}
	for _, k := range wantKeys {
		row := rows[k]
		marked := strings.HasPrefix(row, "!")
		if row == "" || marked != (k == "split" || k == "lonely") {
			t.Errorf("table row of %q: %q (marked %v)", k, row, marked)
		}
	}
	if !strings.Contains(rows["split"], "!"+other[:8]+" ") || !strings.Contains(rows["jobs/nightly"], locks["jobs/nightly"].ID()[:8]) ||
		!strings.Contains(rows[ctlKey], `"ctl\x1b[2J\nkey"`) || !strings.Contains(rows[longKey], "(150 bytes)") {
		t.Errorf("table rows:\n%s", out)
	}
}

// jsonBase64 is s in base64, as encoding/json writes a []byte.
func jsonBase64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

// TestRealTopNodesDown: a node that is down is named, with a quorum the snapshot is complete
// and the exit status 0; without one, the snapshot is still printed, then one error line
// and exit status 1.
func TestRealTopNodesDown(t *testing.T) {
	t.Parallel()
	cluster, nodes, clients := startAuthCluster(t, 3)
	lc, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	l, err := lc.TryAcquire(t.Context(), "down-test", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Nodes()[2].Kill(); err != nil {
		t.Fatal(err)
	}
	doc, raw := topJSON(t, exitOK, "--nodes", nodes)
	if doc.Answered != 2 || doc.Nodes[2].Answered || doc.Nodes[2].Error == "" || len(doc.Locks) != 1 ||
		doc.Locks[0].Holder != l.ID() || doc.Locks[0].State != "held" || doc.Locks[0].Nodes[2].Answered {
		t.Errorf("one of three nodes down: %s", raw)
	}
	if err := cluster.Nodes()[1].Kill(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBin(t, nil, "top", "--once", "--nodes", nodes)
	requireOneLineError(t, code, errOut, exitFail, "only 1 of 3 nodes answered the scan, quorum is 2: locks may be missing; node 1 ("+cluster.Addrs()[1]+"): ")
	if !strings.Contains(out, "FEWER THAN A QUORUM") || !strings.Contains(out, "node 2 ("+cluster.Addrs()[2]+")") ||
		!strings.Contains(out, `"down-test"`) || strings.Contains(out+errOut, topTestPassword) {
		t.Errorf("two of three nodes down:\n%s%s", out, errOut)
	}
}

func TestTopCommandLine(t *testing.T) {
	closed := closedAddr(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"top"}, exitUsage, "top: no nodes: pass --nodes"},
		{[]string{"top", "--nodes", "redis://" + closed, "--interval", "0s"}, exitUsage, "--interval 0s must be positive"},
		{[]string{"top", "--nodes", "redis://" + closed, "--interval", "10"}, exitUsage, "10 has no unit"},
		{[]string{"top", "--nodes", "redis://" + closed, "--limit", "0"}, exitUsage, "--limit 0 must be at least 1"},
		{[]string{"top", "--nodes", "redis://" + closed, "--node-timeout", "0s"}, exitUsage, "--node-timeout 0s must be positive"},
		{[]string{"top", "--nodes", "redis://" + closed, "extra"}, exitUsage, `unexpected argument "extra"`},
		{[]string{"top", "--nodes", "redis://u:" + topTestPassword + "@host:notaport"}, exitFail, "bad node URL"},
	} {
		code, out, errOut := cli(t, nil, tc.args...)
		requireOneLineError(t, code, errOut, tc.code, tc.want)
		if out != "" || strings.Contains(errOut, topTestPassword) {
			t.Errorf("%v: stdout %q, stderr %q", tc.args, out, errOut)
		}
	}
	// Every node down: one snapshot, then one line and exit status 1.
	code, out, errOut := cli(t, nil, "top", "--once", "--nodes", "redis://"+closed)
	requireOneLineError(t, code, errOut, exitFail, "only 0 of 1 nodes answered the scan")
	if !strings.Contains(out, "connection refused") {
		t.Errorf("snapshot with the node down:\n%s", out)
	}
}

// TestDisplayKey: keys are quoted, so control characters show as escapes, and long keys are
// cut at a character boundary with their length.
func TestDisplayKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"plain", `"plain"`},
		{"a\x1b[2J\n\t b", `"a\x1b[2J\n\t b"`},
		{"\xff", `"\xff"`},
		{strings.Repeat("é", 30), `"` + strings.Repeat("é", 20) + `..."(60 bytes)`},
		{strings.Repeat("x", 41), `"` + strings.Repeat("x", 40) + `..."(41 bytes)`},
	} {
		if got := displayKey(tc.key); got != tc.want {
			t.Errorf("displayKey(%q) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

// TestRealTopACLUser: an ACL user with the commands docs/operations.md lists for the library and
// the CLI, plus +scan, can run top and find a lock (SCAN, then GET and PTTL); without +scan
// the node's error says why.
func TestRealTopACLUser(t *testing.T) {
	t.Parallel()
	const pw = "AclTopPW"
	user := func(name string, extra ...string) []string {
		return append(append([]string{"--user", name, "on", ">" + pw, "~*", "resetchannels", "-@all"}, strings.Fields(aclCommands)...), extra...)
	}
	cluster := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: append(user("alice", "+scan"), user("bob")...)})
	addr := cluster.Addrs()[0]
	rc := redis.NewClient(&redis.Options{Addr: addr})
	defer rc.Close()
	const id = "0123456789abcdef0123456789abcdef"
	if err := rc.Set(t.Context(), "acl-lock", id, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	doc, raw := topJSON(t, exitOK, "--nodes", "redis://alice:"+pw+"@"+addr)
	if doc.Answered != 1 || !doc.Nodes[0].Answered || len(doc.Locks) != 1 || doc.Locks[0].Key != "acl-lock" || doc.Locks[0].Holder != id {
		t.Errorf("alice (+scan): %s", raw)
	}
	// The node list from $REDLOCK_NODES_FILE and the password from $REDISCLI_AUTH, as for
	// exec and status.
	file := filepath.Join(t.TempDir(), "nodes")
	if err := os.WriteFile(file, []byte("redis://alice@"+addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runBin(t, []string{nodesFileEnv + "=" + file, authEnv + "=" + pw}, "top", "--once")
	if code != exitOK || !strings.Contains(out, `"acl-lock"`) || strings.Contains(out+errOut, pw) {
		t.Errorf("alice from %s and %s: exit code %d, stdout %q, stderr %q", nodesFileEnv, authEnv, code, out, errOut)
	}
	code, out, errOut = runBin(t, nil, "top", "--once", "--json", "--nodes", "redis://bob:"+pw+"@"+addr)
	if code != exitFail || !strings.Contains(out, "NOPERM") || strings.Contains(out+errOut, pw) {
		t.Errorf("bob (no +scan): exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRealTopFindsLocksAmongCounters: on nodes that hold the slot layout's
// 16 384 slot counters each, top with its default flags shows every one of 20 held locks;
// before, its scan stopped after 1 000 string keys, most of them counters, and showed about
// one lock in ten (exit status 0, "truncated"). A --limit below the node's string keys stops
// the scan, and the hint says so truthfully; --match then narrows the scan itself (SCAN
// MATCH), so the same --limit finds every lock it matches.
func TestRealTopFindsLocksAmongCounters(t *testing.T) {
	t.Parallel()
	cluster, nodes := startCluster(t, 5)
	clients := cluster.ClientsT(t)
	ctx := ctxT(t, time.Minute)
	// The counters are named as the slot layout names them (SlotCounterPrefix + "{tag}"), one
	// per hash slot's worth: top tells the library's keys by their prefix, not by their slot.
	for _, c := range clients {
		pipe := c.Pipeline()
		for i := range 16384 {
			pipe.Set(ctx, redlock.SlotCounterPrefix+"{"+strconv.Itoa(i)+"}", 1796126097054749+i, 7*24*time.Hour)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lc, err := redlock.New(clients)
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ids := map[string]string{}
	var held []string
	for i := range 20 {
		k := fmt.Sprintf("job-%02d", i)
		l, err := lc.TryAcquire(ctx, k, time.Minute)
		if err != nil {
			t.Fatalf("acquire %q: %v", k, err)
		}
		held, ids[k] = append(held, k), l.ID()
	}

	doc, raw := topJSON(t, exitOK, "--nodes", nodes)
	if keys := locksOf(doc); !slices.Equal(keys, held) || doc.Truncated || doc.Found != len(held) {
		t.Fatalf("default flags: found %d, truncated %v, locks %q; want the %d held locks, not truncated\n%s", doc.Found, doc.Truncated, keys, len(held), raw[:min(len(raw), 2000)])
	}
	for _, l := range doc.Locks {
		if l.State != "held" || l.Holder != ids[l.Key] || l.HolderNodes != 5 {
			t.Errorf("lock %q: %+v; want held by %s on 5 nodes", l.Key, l, ids[l.Key])
		}
	}
	for i, n := range doc.Nodes {
		if n.Examined < 16384+len(held) || n.Truncated {
			t.Errorf("node %d: examined %d, truncated %v; want every string key (%d or more), not truncated", i, n.Examined, n.Truncated, 16384+len(held))
		}
	}

	// A --limit below the string keys of a node: the scan stops there, and says so.
	const limit = "8000"
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--limit", limit)
	if !doc.Truncated || !doc.Nodes[0].Truncated || doc.Nodes[0].Examined != 8000 {
		t.Errorf("--limit %s: truncated %v, node 0 %+v; want the scan stopped at 8000 keys", limit, doc.Truncated, doc.Nodes[0])
	}
	code, out, errOut := runBin(t, nil, "top", "--nodes", nodes, "--limit", limit)
	if code != exitOK || !strings.Contains(out, "the scan of 5 nodes stopped at --limit "+limit+" string keys: locks may be missing (raise --limit, or narrow the scan with --match)") {
		t.Errorf("--limit %s, table: exit code %d, stderr %q, header:\n%s", limit, code, errOut, out)
	}
	// --match narrows the scan: the same --limit examines only the matching keys.
	doc, _ = topJSON(t, exitOK, "--nodes", nodes, "--limit", limit, "--match", "job-1*")
	if keys := locksOf(doc); !slices.Equal(keys, held[10:]) || doc.Truncated || doc.Nodes[0].Examined != 10 {
		t.Errorf("--match job-1*: locks %q, truncated %v, node 0 %+v; want %q, 10 keys examined", keys, doc.Truncated, doc.Nodes[0], held[10:])
	}
	// More locks over the nodes than --limit, though no node's scan stopped: the hint says
	// that instead. Nodes 0 and 1 hold three keys each that no other node has.
	const other = "0123456789abcdef0123456789abcdef"
	for i, k := range []string{"solo-a", "solo-b", "solo-c", "solo-d", "solo-e", "solo-f"} {
		if err := clients[i/3].Set(ctx, k, other, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut = runBin(t, nil, "top", "--nodes", nodes, "--match", "solo-*", "--limit", "4")
	if code != exitOK || !strings.Contains(out, "locks: 4 shown of 6 found") ||
		!strings.Contains(out, "more than --limit 4 locks found: 4 read, held ones first (raise --limit, or narrow with --match)") || strings.Contains(out, "the scan of") {
		t.Errorf("--match solo-* --limit 4: exit code %d, stderr %q, table:\n%s", code, errOut, out)
	}
}
