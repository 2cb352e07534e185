package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/go-multierror"
)

// TestHolderIDForm: every id the library draws has the form IsHolderID accepts, and values
// that differ from it in length or alphabet are refused.
func TestHolderIDForm(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := newHolderID()
		if !IsHolderID(id) {
			t.Fatalf("newHolderID() = %q, refused by IsHolderID", id)
		}
		if seen[id] {
			t.Fatalf("newHolderID() repeated %q", id)
		}
		seen[id] = true
	}
	for _, v := range []string{"", strings.Repeat("a", 31), strings.Repeat("a", 33),
		strings.Repeat("A", 32), strings.Repeat("g", 32), strings.Repeat("0", 31) + " "} {
		if IsHolderID(v) {
			t.Errorf("IsHolderID(%q) = true, want false", v)
		}
	}
}

// TestQuorumErrorDetail: Detail is Error without the sentinel and the key, with the same
// vote, cause and node errors.
func TestQuorumErrorDetail(t *testing.T) {
	qe := &QuorumError{Op: "acquire", Key: "k", Quorum: 3, Agreed: 1, Total: 5,
		Cause: errors.New("validity ran out"), sentinel: ErrNotAcquired,
		Nodes: &multierror.Error{Errors: []error{&NodeError{Node: 2, Addr: "127.0.0.1:1", Err: errors.New("refused")}}}}
	want := `acquire: 1 of 5 nodes agreed, quorum is 3: validity ran out; node 2 (127.0.0.1:1): refused`
	if got := qe.Detail(); got != want {
		t.Fatalf("Detail() = %q, want %q", got, want)
	}
	if got, suffix := qe.Error(), strings.TrimPrefix(want, "acquire: "); !strings.HasSuffix(got, suffix) || !strings.Contains(got, `acquire "k"`) {
		t.Fatalf("Error() = %q, want the key and the same vote %q", got, suffix)
	}
}
