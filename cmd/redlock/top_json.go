package main

// redlock top --json: one JSON document per refresh. Its fields are documented in
// docs/cli.md and kept stable for scripts.

import (
	"encoding/base64"
	"encoding/json"
	"io"

	"github.com/quorumlock/redlock"
)

// topDoc is one --json document. Its fields are documented in docs/cli.md; keep them stable.
type topDoc struct {
	Time       string       `json:"time"` // RFC 3339, milliseconds
	Quorum     int          `json:"quorum"`
	Total      int          `json:"total"`
	Answered   int          `json:"answered"`
	Nodes      []topNodeDoc `json:"nodes"`
	Found      int          `json:"found"`
	Truncated  bool         `json:"truncated"`
	HiddenFree int          `json:"hidden_free"`
	Locks      []topLockDoc `json:"locks"`
	// RWLocks are the read/write locks shown by their readers, by name; FoundRW how many were
	// found by a readers set.
	RWLocks  []topRWDoc `json:"rwlocks"`
	FoundRW  int        `json:"found_rwlocks"`
	HiddenRW int        `json:"hidden_rwlocks"` // found, but without readers: not listed (0 with --all)
}

// topRWDoc is one read/write lock of a topDoc: status --rwlock --json's document, and its
// readers row.
type topRWDoc struct {
	rwDoc
	NameBase64      string `json:"rwlock_base64"` // the name's exact bytes, base64 (standard, padded)
	ReadersState    string `json:"readers_state"` // "read", "partial", "free" or "unknown", as in the table
	ReadersDisagree bool   `json:"readers_disagree"`
	ReaderNodes     int    `json:"reader_nodes"`
	ReadTTLMillis   int64  `json:"read_ttl_ms"`
}

// topNodeDoc is one node of a topDoc: its scan.
type topNodeDoc struct {
	Node      int    `json:"node"`
	Addr      string `json:"addr"`
	Answered  bool   `json:"answered"`
	Error     string `json:"error"`
	Examined  int    `json:"examined"`
	Truncated bool   `json:"truncated"`
}

// topLockDoc is one lock of a topDoc: its row, and its status on every node.
type topLockDoc struct {
	Key              string          `json:"key"`
	KeyBase64        string          `json:"key_base64"`
	State            string          `json:"state"`
	Disagree         bool            `json:"disagree"`
	Holder           string          `json:"holder"`
	HolderNodes      int             `json:"holder_nodes"`
	Quorum           bool            `json:"quorum"`
	TTLMillis        int64           `json:"ttl_ms"`
	NextTokenAtLeast uint64          `json:"next_token_at_least"`
	Nodes            []nodeStatusDoc `json:"nodes"`
	// Semaphore and Permit name the semaphore and the permit's number when the key is a
	// permit key (redlock.ParsePermitKey); both absent otherwise.
	Semaphore string `json:"semaphore,omitempty"`
	Permit    *int   `json:"permit,omitempty"`
}

// writeTopJSON prints the snapshot as one JSON document on one line.
func writeTopJSON(w io.Writer, s *topSnap, addrs []string) error {
	doc := topDoc{
		Time: s.at.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Quorum: s.quorum, Total: len(s.nodes), Answered: s.answered,
		Nodes: make([]topNodeDoc, 0, len(s.nodes)), Found: s.found, Truncated: s.truncated, HiddenFree: s.hiddenFree,
		Locks: make([]topLockDoc, 0, len(s.locks)),
	}
	for i, n := range s.nodes {
		nd := topNodeDoc{Node: i, Addr: addrs[i], Answered: n.err == nil, Examined: n.examined, Truncated: n.truncated}
		if n.err != nil {
			nd.Error = oneLine(withNodeHint(addrs[i], n.err.Error()))
		}
		doc.Nodes = append(doc.Nodes, nd)
	}
	for _, st := range s.locks {
		v := viewOf(st)
		ld := topLockDoc{
			Key: st.Key, KeyBase64: base64.StdEncoding.EncodeToString([]byte(st.Key)), State: v.state, Disagree: v.disagree,
			Holder: v.holder, HolderNodes: v.on, Quorum: st.HeldByQuorum(), TTLMillis: quorumTTL(st).Milliseconds(),
			NextTokenAtLeast: uint64(st.NextTokenAtLeast), Nodes: nodeDocs(st),
		}
		if name, i, ok := redlock.ParsePermitKey(st.Key); ok {
			ld.Semaphore, ld.Permit = name, &i
		}
		doc.Locks = append(doc.Locks, ld)
	}
	doc.RWLocks, doc.FoundRW, doc.HiddenRW = make([]topRWDoc, 0, len(s.rws)), s.foundRW, s.hiddenRW
	for _, rw := range s.rws {
		v := readersViewOf(rw)
		doc.RWLocks = append(doc.RWLocks, topRWDoc{rwDoc: newRWDoc(rw), NameBase64: base64.StdEncoding.EncodeToString([]byte(rw.Name)), ReadersState: v.state, ReadersDisagree: v.disagree,
			ReaderNodes: v.on, ReadTTLMillis: v.ttl.Milliseconds()})
	}
	return json.NewEncoder(w).Encode(doc) // one line per document
}
