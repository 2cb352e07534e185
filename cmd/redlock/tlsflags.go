package main

// The TLS flags of the commands that reach real nodes (exec, status, top), for rediss://
// nodes with a private CA or client certificates.

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
)

// tlsFlags are the TLS settings of exec, status and top for rediss:// nodes: the CA that signed
// the servers' certificates, and a client certificate for servers that ask for one
// (redis-server --tls-auth-clients). Without them a rediss:// node is verified against the
// system's roots (and $SSL_CERT_FILE), as go-redis does.
type tlsFlags struct {
	ca, cert, key string
}

func (t *tlsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&t.ca, "tls-ca", "", "PEM `FILE` of the CA that signed the nodes' certificates (rediss:// nodes)")
	fs.StringVar(&t.cert, "tls-cert", "", "PEM `FILE` of the client certificate, for nodes that ask for one (with --tls-key)")
	fs.StringVar(&t.key, "tls-key", "", "PEM `FILE` of the client certificate's private key")
}

func (t *tlsFlags) given() bool { return t.ca != "" || t.cert != "" || t.key != "" }

// apply sets the TLS settings on every node's options. The flags need rediss:// nodes: a
// plain redis:// node with TLS flags is a mistake worth saying.
func (t *tlsFlags) apply(cmdName string, urls []nodeURL) error {
	if !t.given() {
		return nil
	}
	if (t.cert == "") != (t.key == "") {
		return usageErrorf("%s: --tls-cert and --tls-key go together", cmdName)
	}
	var roots *x509.CertPool
	if t.ca != "" {
		pem, err := os.ReadFile(t.ca)
		if err != nil {
			return fmt.Errorf("%s: --tls-ca: %v", cmdName, err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return fmt.Errorf("%s: --tls-ca %s holds no PEM certificate", cmdName, t.ca)
		}
	}
	var certs []tls.Certificate
	if t.cert != "" {
		c, err := tls.LoadX509KeyPair(t.cert, t.key)
		if err != nil {
			return fmt.Errorf("%s: --tls-cert/--tls-key: %v", cmdName, err)
		}
		certs = []tls.Certificate{c}
	}
	for i, u := range urls {
		if u.opts.TLSConfig == nil {
			return usageErrorf("%s: TLS flags given, but node %d (%s) is not a rediss:// URL", cmdName, i+1, u.opts.Addr)
		}
		cfg := u.opts.TLSConfig.Clone() // keeps ServerName, set by go-redis from the URL's host
		if roots != nil {
			cfg.RootCAs = roots
		}
		if certs != nil {
			cfg.Certificates = certs
		}
		u.opts.TLSConfig = cfg
	}
	return nil
}

// tlsHint adds advice to a failure that looks like a certificate problem: the server's alert
// about ours ("remote error: tls: certificate required", "bad certificate") asks for a client
// certificate; any other (the server's certificate not verified) for the CA.
func tlsHint(msg string) string {
	switch {
	case strings.Contains(msg, "--tls-"):
		return msg
	case strings.Contains(msg, "remote error: tls:") && strings.Contains(msg, "certificate"):
		return msg + " (the server wants a client certificate it trusts: pass --tls-cert FILE and --tls-key FILE)"
	case strings.Contains(msg, "certificate"):
		return msg + " (for a private CA, pass --tls-ca FILE)"
	}
	return msg
}
