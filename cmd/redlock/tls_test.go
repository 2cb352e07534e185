package main

// Tests of the TLS flags against redis-server nodes that speak TLS.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redisproc"
	"github.com/quorumlock/redlock/internal/testutil"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate, all
// signed by the CA, as PEM files in dir.
func testPKI(t *testing.T, dir string) (ca, srvCert, srvKey, cliCert, cliKey string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redlock test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(k)
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", kder)
	}
	ca = write("ca.crt", "CERTIFICATE", caDER)
	srvCert, srvKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return
}

// TestRealTLSNodes: exec, status and top reach redis-server nodes over TLS that verify client
// certificates, with --tls-ca, --tls-cert and --tls-key; without the CA the failure says
// what to pass; TLS flags with a plain redis:// node are a usage error.
func TestRealTLSNodes(t *testing.T) {
	dir := t.TempDir()
	ca, srvCert, srvKey, cliCert, cliKey := testPKI(t, dir)
	var urls []string
	var clusters []*redisproc.Cluster
	for range 3 {
		port := testutil.FreePortT(t)
		c := redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--tls-port", strconv.Itoa(port),
			"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", ca, "--tls-auth-clients", "yes"}})
		clusters = append(clusters, c)
		urls = append(urls, "rediss://127.0.0.1:"+strconv.Itoa(port))
	}
	nodes := strings.Join(urls, ",")
	flags := []string{"--tls-ca", ca, "--tls-cert", cliCert, "--tls-key", cliKey}
	if code, _, errOut := runBin(t, nil, append([]string{"exec", "--nodes", nodes}, append(flags, "tls:job", "--", "true")...)...); code != 0 {
		t.Fatalf("exec over TLS: exit code %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runBin(t, nil, append([]string{"status", "--nodes", nodes}, append(flags, "tls:job")...)...); code != 0 || !strings.Contains(out, "quorum 2") {
		t.Fatalf("status over TLS: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// top takes the same flags: run under exec, it finds exec's lock.
	top := append([]string{redlockBin(t), "top", "--once", "--json", "--nodes", nodes}, flags...)
	code, out, errOut := runBin(t, nil, append([]string{"exec", "--nodes", nodes}, append(flags, append([]string{"tls:top", "--"}, top...)...)...)...)
	var doc topDoc
	if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Answered != 3 || len(doc.Locks) != 1 || doc.Locks[0].Key != "tls:top" || doc.Locks[0].State != "held" {
		t.Fatalf("top over TLS under exec: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// Without the CA: the system roots do not know it.
	code, _, errOut = runBin(t, nil, "status", "--nodes", nodes, "--tls-cert", cliCert, "--tls-key", cliKey, "tls:job")
	if code == 0 || !strings.Contains(errOut, "--tls-ca") {
		t.Fatalf("without --tls-ca: exit code %d, stderr %q", code, errOut)
	}
	code, _, errOut = runBin(t, nil, "top", "--once", "--nodes", nodes, "--tls-cert", cliCert, "--tls-key", cliKey)
	if code != exitFail || !strings.Contains(errOut, "--tls-ca") {
		t.Fatalf("top without --tls-ca: exit code %d, stderr %q", code, errOut)
	}
	// TLS flags and a plain node.
	code, _, errOut = runBin(t, nil, "status", "--nodes", "redis://127.0.0.1:1", "--tls-ca", ca, "tls:job")
	if code != exitUsage || !strings.Contains(errOut, "not a rediss:// URL") {
		t.Fatalf("TLS flags with redis://: exit code %d, stderr %q", code, errOut)
	}
	_ = clusters
}

// TestRealWrongSchemeHints: a node URL with the wrong scheme is named as such. A redis://
// URL for a TLS port (the server closes the connection: "EOF") and a rediss:// URL for a
// port without TLS (the handshake is never answered: "no answer") get a hint naming the
// scheme to use, in exec's, status's and top's messages; the password of the URL shows in
// none of them; a node that is only down gets no hint.
func TestRealWrongSchemeHints(t *testing.T) {
	dir := t.TempDir()
	ca, srvCert, srvKey, _, _ := testPKI(t, dir)
	tlsPort := testutil.FreePortT(t)
	redisproc.StartT(t, 1, redisproc.Config{ExtraArgs: []string{"--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", srvCert, "--tls-key-file", srvKey, "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"}})
	plain := redisproc.StartT(t, 2, redisproc.Config{}).Addrs()
	tlsAddr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	const secret = "s3cr3t-never-printed"
	toTLS := "speaks TLS: use rediss://" + tlsAddr
	toPlain := "this port answers plain Redis, without TLS"

	// status: the TLS port named redis://, with a password, beside two healthy nodes.
	nodes := "redis://:" + secret + "@" + tlsAddr + ",redis://" + plain[0] + ",redis://" + plain[1]
	code, out, errOut := runBin(t, nil, "status", "--nodes", nodes, "scheme:job")
	if code != 0 || !strings.Contains(out, toTLS) {
		t.Fatalf("status, redis:// for a TLS port: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runBin(t, nil, "status", "--json", "--nodes", nodes, "scheme:job")
	if code != 0 || !strings.Contains(out, toTLS) {
		t.Fatalf("status --json, redis:// for a TLS port: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	// exec: too few nodes answer PING, and each wrong scheme is named.
	nodes = "redis://:" + secret + "@" + tlsAddr + ",rediss://" + plain[0] + ",redis://" + plain[1]
	code, out, errOut = runBin(t, nil, "exec", "--nodes", nodes, "scheme:job", "--", "true")
	if code != exitFail || !strings.Contains(errOut, toTLS) || !strings.Contains(errOut, toPlain) {
		t.Fatalf("exec with two wrong schemes: exit code %d, stderr %q", code, errOut)
	}
	all := out + errOut
	// top: the same nodes, one snapshot.
	code, out, errOut = runBin(t, nil, "top", "--once", "--nodes", nodes)
	if code != exitFail || !strings.Contains(out, toTLS) || !strings.Contains(out, toPlain) || !strings.Contains(errOut, toTLS) {
		t.Fatalf("top with two wrong schemes: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	all += out + errOut
	code, out, errOut = runBin(t, nil, "top", "--once", "--json", "--nodes", nodes)
	if code != exitFail || !strings.Contains(out, toTLS) || !strings.Contains(out, toPlain) {
		t.Fatalf("top --json with two wrong schemes: exit code %d, stdout %q, stderr %q", code, out, errOut)
	}
	all += out + errOut
	if strings.Contains(all, secret) {
		t.Fatalf("the URL's password was printed: %q", all)
	}
	// A node that is down, under either scheme, gets no hint.
	dead1, dead2 := testutil.FreePortT(t), testutil.FreePortT(t)
	code, _, errOut = runBin(t, nil, "exec", "--nodes", "redis://127.0.0.1:"+strconv.Itoa(dead1)+",rediss://127.0.0.1:"+strconv.Itoa(dead2)+",redis://"+plain[1], "scheme:job", "--", "true")
	if code != exitFail || strings.Contains(errOut, "use redis") {
		t.Fatalf("exec with nodes down: exit code %d, stderr %q", code, errOut)
	}
}
