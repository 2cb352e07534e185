package main

// Redis's glob matching, for top's --match: the keys top shows must be the ones a SCAN
// MATCH with the same pattern returns.

// redisGlob reports whether s matches the glob pattern as Redis's KEYS and SCAN MATCH match
// keys (stringmatchlen in Redis's util.c): '*' any bytes, '?' one byte, '[abc]', '[^abc]'
// and '[a-z]' one byte of a set, '\' quotes the next byte; bytes compare exactly. The
// standard library's path.Match differs ('*' stops at '/', an unclosed '[' is an error), and
// lock keys such as "jobs/nightly" are common, so top matches keys as Redis would.
// TestRealRedisGlobMatchesRedis compares it with a real server's KEYS.
func redisGlob(pattern, s string) bool {
	skip := false
	return globMatch(pattern, s, &skip)
}

// globMatch is redisGlob's recursion; skip is set once a '*' has tried every suffix of s
// and failed, after which no shorter suffix can match either (Redis prunes the same way,
// which keeps patterns with many stars from taking exponential time).
func globMatch(p, s string, skip *bool) bool {
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			return globStar(p, s, skip)
		case '?':
			s = s[1:]
		case '[':
			var match bool
			if p, match = globSet(p[1:], s[0]); !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		if len(p) > 0 { // empty only after an unclosed '['
			p = p[1:]
		}
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// globStar matches s against p, which starts with a '*': a run of stars is one star, a
// trailing star matches whatever is left, and otherwise the rest of p is tried against
// every suffix of s, longest first, until one matches or skip says none can.
func globStar(p, s string, skip *bool) bool {
	for len(p) > 1 && p[1] == '*' {
		p = p[1:]
	}
	if len(p) == 1 {
		return true
	}
	for len(s) > 0 {
		if globMatch(p[1:], s, skip) {
			return true
		}
		if *skip {
			return false
		}
		s = s[1:]
	}
	*skip = true
	return false
}

// globSet matches the byte c against the set that p starts with, just after its '[': a
// leading '^' negates it, '\' quotes a byte, "a-z" is a range. It returns p from the set's
// closing ']' on (empty for an unclosed set, which ends with the pattern) and whether c
// matched.
func globSet(p string, c byte) (string, bool) {
	// at returns the pattern's next byte, 0 past its end: Redis reads its strings' NUL
	// terminator there, and the decisions below are the ones it takes on that byte.
	at := func() byte {
		if len(p) > 0 {
			return p[0]
		}
		return 0
	}
	not := at() == '^'
	if not {
		p = p[1:]
	}
	match := false
	for {
		if at() == '\\' && len(p) >= 2 {
			p = p[1:]
			if p[0] == c {
				match = true
			}
		} else if at() == ']' {
			break
		} else if len(p) == 0 {
			break // an unclosed '[': the set ends with the pattern
		} else if len(p) >= 3 && p[1] == '-' {
			// Redis compares these as C chars, signed on the machines it runs on.
			lo, hi, b := int8(p[0]), int8(p[2]), int8(c)
			if lo > hi {
				lo, hi = hi, lo
			}
			p = p[2:]
			if b >= lo && b <= hi {
				match = true
			}
		} else if p[0] == c {
			match = true
		}
		p = p[1:]
	}
	return p, match != not
}
