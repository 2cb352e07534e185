package main

// Where a command's node list comes from: --nodes, else $REDLOCK_NODES, else the file that
// $REDLOCK_NODES_FILE names, and the environment variables that may carry the nodes'
// credentials. Parsing the list is in nodeurl.go, connecting to the nodes in nodes.go.

import (
	"fmt"
	"os"
	"strings"
)

// nodesEnv is the environment variable that names real nodes when --nodes is not given.
const nodesEnv = "REDLOCK_NODES"

// nodesFileEnv names a file that holds the node list, for credentials that should appear
// neither in argv (/proc/PID/cmdline) nor in the environment of every child: one or more
// URLs per line, separated by commas or new lines; blank lines, lines starting with '#' and
// what follows a blank or a comma and a '#' on a line are skipped. Used when neither --nodes nor REDLOCK_NODES is given.
const nodesFileEnv = "REDLOCK_NODES_FILE"

// authEnv is the password for the nodes whose URL has none, as redis-cli reads it.
const authEnv = "REDISCLI_AUTH"

// credentialEnv lists the variables that carry node addresses or credentials; exec removes
// them from its command's environment unless --keep-node-env is given.
var credentialEnv = []string{nodesEnv, nodesFileEnv, authEnv}

// nodeSpec returns the node list the user asked for: the --nodes flag's value, else the
// REDLOCK_NODES environment variable, else the entries of the file REDLOCK_NODES_FILE names,
// and which of these it came from. An empty spec means no real nodes were named.
func nodeSpec(e *env, flagValue string) (spec, source string, err error) {
	if strings.TrimSpace(flagValue) != "" {
		return flagValue, "--nodes", nil
	}
	if v := e.getenv(nodesEnv); strings.TrimSpace(v) != "" {
		return v, nodesEnv, nil
	}
	if path := e.getenv(nodesFileEnv); strings.TrimSpace(path) != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", "", fmt.Errorf("%s: %v", nodesFileEnv, err)
		}
		entries := nodesFileEntries(string(b))
		if len(entries) == 0 {
			return "", "", usageErrorf("%s (%s) names no nodes: write redis://HOST:PORT URLs in it, one or more a line (try 'redlock dev' for local nodes)", nodesFileEnv, path)
		}
		return strings.Join(entries, ","), nodesFileEnv + " (" + path + ")", nil
	}
	return "", "", nil
}

// realNodes resolves the node list of a command that needs real nodes (exec, status, top), as
// nodeSpec finds it, and parses it. No list at all is a usage error that points at
// 'redlock dev'; a malformed list is an ordinary error naming the bad entry.
func realNodes(e *env, cmdName, flagValue string) ([]nodeURL, string, error) {
	spec, source, err := nodeSpec(e, flagValue)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", cmdName, err)
	}
	if spec == "" {
		return nil, "", usageErrorf("%s: no nodes: pass --nodes redis://HOST:PORT,... or set %s or %s (try 'redlock dev' for local nodes)", cmdName, nodesEnv, nodesFileEnv)
	}
	urls, err := parseNodeURLs(spec, source, e.getenv(authEnv))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", cmdName, err)
	}
	return urls, source, nil
}
