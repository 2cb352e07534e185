package main

// redisGlob reports whether s matches the glob pattern as Redis's KEYS and SCAN MATCH match
// keys (stringmatchlen in Redis's util.c): '*' any bytes, '?' one byte, '[abc]', '[^abc]'
// and '[a-z]' one byte of a set, '\' quotes the next byte; bytes compare exactly. The
// standard library's path.Match differs ('*' stops at '/', an unclosed '[' is an error), and
// lock keys such as "jobs/nightly" are common, so top matches keys as Redis would.
// TestRedisGlobMatchesRedis compares it with a real server's KEYS.
func redisGlob(pattern, s string) bool {
	skip := false
	return globMatch(pattern, s, &skip)
}

// globMatch is redisGlob's recursion; skip is set once a '*' has tried every suffix of s
// and failed, after which no shorter suffix can match either (Redis prunes the same way,
// which keeps patterns with many stars from taking exponential time).
func globMatch(p, s string, skip *bool) bool {
	// at returns the pattern byte at i, 0 past its end: Redis reads its strings' NUL
	// terminator there, and the decisions below are the ones it takes on that byte.
	at := func(i int) byte {
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
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
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := at(0) == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if at(0) == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if at(0) == ']' {
					break
				} else if len(p) == 0 {
					break // an unclosed '[': the set ends with the pattern
				} else if len(p) >= 3 && p[1] == '-' {
					// Redis compares these as C chars, signed on the machines it runs on.
					lo, hi, c := int8(p[0]), int8(p[2]), int8(s[0])
					if lo > hi {
						lo, hi = hi, lo
					}
					p = p[2:]
					if c >= lo && c <= hi {
						match = true
					}
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
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
