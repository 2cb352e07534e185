package redlock

import (
	"time"

	"github.com/quorumlock/redlock/internal/transport"
)

// The waiter queue on the nodes (lua/queue.lua; docs/design.md §3.10). When many processes
// wait for one key, a release used to wake all of them: they reached the nodes together,
// split the votes, undid and tried again, and the more waited, the fewer got the lock. Now
// an Acquire that waits takes a place in the key's queue on every node, with a ticket that
// is the same on all of them, and a node lets only the head of its queue take a free key; a
// release names the head, and only the head's process is told (on its turn channel). A
// queue only ever refuses: it sits in front of SET NX in the acquire script and never sets
// a key itself, so mutual exclusion and the fencing tokens rest on the argument of §5
// unchanged. What the queue adds is liveness, and every part of it is bounded: a place
// that is not refreshed expires, a free key whose head does not come within the grace
// passes to the next waiter, and a lost turn message costs the head one retry pause.

// QueuePrefix and WaitersPrefix begin the names of a lock key's waiter queue (a sorted set:
// Client id → ticket) and of its waiters hash (Client id → liveness deadline), which the
// nodes keep while an Acquire of some Client waits for the key. Both are in the key's
// cluster hash slot, named as the fence counter is (slotKey), and lock keys may not start
// with either prefix. The queues need, beyond the lock's own ACL commands, +exists +zadd
// +zrem +zrange +zrank +zcard +hset +hget +hdel +time (docs/operations.md); without them
// the scripts skip the queue and waiters contend as without one.
const (
	QueuePrefix   = "redlock:queue:"
	WaitersPrefix = "redlock:waiters:"
)

// turnChannelPrefix begins the channel on which a Client hears that its waiter is the head
// of a key's queue on a node: turnChannelPrefix + the Client's id. It lies inside the
// wake-up channels' pattern (WakeChannelPrefix), so the ACL channel rule for wake-ups
// covers it, and no key's own channel can have its name, since no lock key starts with
// QueuePrefix.
const turnChannelPrefix = WakeChannelPrefix + QueuePrefix

// runnerUpMark begins the message that tells a Client its place is the runner-up of a key's
// queue (lua/queue.lua, qtell): the mark, then what a turn carries. A turn's payload begins
// with a holder id, in hex digits, never with the mark.
const runnerUpMark = "~"

// turnPayload is the message of a turn: the released holder id (32 hex digits, so that a
// Client hearing one release from several nodes counts it once), then the lock key.
func turnPayload(payload string) (id, key string, ok bool) {
	if len(payload) <= holderIDLen {
		return "", "", false
	}
	return payload[:holderIDLen], payload[holderIDLen:], true
}

// queueKeys names a lock key's queue and waiters hash.
type queueKeys struct {
	queue, waiters string
}

// newQueueKeys names key's queue and waiters hash; key has been validated (newLockKeys), so
// slotKey cannot fail.
func newQueueKeys(key string) queueKeys {
	q, _ := slotKey(QueuePrefix, key, true)
	w, _ := slotKey(WaitersPrefix, key, true)
	return queueKeys{queue: q, waiters: w}
}

// queueArgs is what an attempt of a queued Acquire sends besides the lock's own arguments.
type queueArgs struct {
	keys   queueKeys
	member string // the Client's id
	ticket int64  // microseconds, on the Client's clock, when the oldest waiter began
	live   int64  // ms a place lasts without a refresh (queueLive)
	grace  int64  // ms a free key waits for its head (queueGrace)
}

// queuePollMax is the longest mean pause of a waiter that is not at the head of the queue:
// a waiter r places behind the head retries (refreshing its place) after about min(r d,
// queuePollMax), with d the retry delay, so that the waiters of a long queue cost the nodes
// the sum of 1/r, not r, attempts per retry delay.
func queuePollMax(d time.Duration) time.Duration { return max(16*d, time.Second) }

// queueLive is how long a place in a queue lasts without a refresh: four times the longest
// mean pause, so that the longest jittered pause (1.5 times the mean) leaves room for two
// missed refreshes. A waiter that dies is out of the queue by then.
func queueLive(d time.Duration) time.Duration { return 4 * queuePollMax(d) }

// queueGrace is how long a free key waits for the head of its queue before the next waiter's
// turn: half the retry delay (at least a millisecond), far above the round trips of a
// handoff, so that a waiter killed while it was the head delays the others by less than one
// retry pause: the runner-up, told so when nobody heard the head's turn, tries again by
// runnerUpWait (design.md §3.10, rule 4, says what this does not cover).
func queueGrace(d time.Duration) time.Duration { return max(d/2, time.Millisecond) }

// runnerUpWait is how long after a node's runner-up notice the Client's queued waiter tries
// again at the latest: the grace and half of it again, so that its attempt reaches the nodes
// once the grace has passed on them (each counts it from its own release), and a waiter that
// died at the head delays the next one by less than a retry pause (jitter draws it from
// [d/2, 3d/2)): 3d/4 with the grace at d/2.
func runnerUpWait(d time.Duration) time.Duration { return queueGrace(d) * 3 / 2 }

// queuePause is the mean pause of a queued waiter that was refused with ahead waiters in
// front of it on the nodes (the fewest any node reported): the retry delay d for the head
// and the runner-up, r d for r waiters ahead, at most queuePollMax.
func queuePause(d time.Duration, ahead int) time.Duration {
	if ahead <= 1 {
		return d
	}
	return min(time.Duration(ahead)*d, queuePollMax(d))
}

// queued reports whether an Acquire of set waits in the nodes' queue: single keys, with
// wake-ups on (without them nobody would tell the head that its turn has come).
func (c *Client) queued(set lockKeys) bool {
	return len(set.keys) == 1 && !c.cfg.noWakeups
}

// newQueueArgs are the queue arguments of an Acquire of key whose oldest waiter here began
// at ticket.
func (c *Client) newQueueArgs(key string, ticket int64) *queueArgs {
	d := c.cfg.retryDelay
	return &queueArgs{keys: newQueueKeys(key), member: c.id, ticket: ticket,
		live: queueLive(d).Milliseconds(), grace: queueGrace(d).Milliseconds()}
}

// leaveQueue takes this Client out of key's queue on every node, once its last waiting
// Acquire of the key has given up; a free key's next waiter is told its turn has come.
// Nothing waits for it: a node that misses it drops the place when it expires. On each node
// it goes behind this Client's last release or undo of the key still on its way there, and
// so behind the acquire call that undo follows (a refused queued attempt's call to a slow
// node, which is kept: attempt.fail): else that call could land after the leave and put the
// place back. It is kept in the pending releases of the key, so that this Client's next
// acquire of the key goes after it on each node: else a new Acquire right after the one that
// gave up could queue the Client on a node before the leave landed there and took that new
// place out, and the nodes' queues would disagree on their head with nobody told its turn.
func (c *Client) leaveQueue(key string) {
	if c.begin() != nil {
		return // closed: Close takes the place out (sendLeave)
	}
	defer c.end()
	c.sendLeave(key)
}

// sendLeave sends leave.lua for key to every node, in the order leaveQueue says; nothing waits
// for it but Close (every call is counted until it is final).
func (c *Client) sendLeave(key string) {
	cmd := newLeaveCommand(key, newQueueKeys(key), c.id, newHolderID())
	keys := []string{key}
	after := c.pending.after(keys)
	rel := c.pending.begin(keys, len(c.nodes))
	defer c.pending.end(rel)
	for i := range c.nodes {
		var prev *transport.Call
		if after != nil {
			prev = after[i]
		}
		cl := cmd.newCall(0, nil)
		c.pending.add(rel, i, cl)
		c.sendAfterTo(i, prev, cl)
	}
}
