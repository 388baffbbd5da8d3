package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/httpgw"
)

func init() { subcommands["cert"] = runCert }

// addTLSFlags adds the flags that choose the TLS certificate of the HTTPS
// and AMQPS listeners (shared by serve and cert).
func addTLSFlags(fs *flag.FlagSet, o *app.Options) {
	fs.StringVar(&o.TLSCert, "tls-cert", "", "certificate PEM for HTTPS and AMQPS (default: one issued by a local CA, generated on first use)")
	fs.StringVar(&o.TLSKey, "tls-key", "", "private key PEM of --tls-cert")
	fs.StringVar(&o.TLSDir, "tls-dir", "", "directory of the generated local CA and certificate (default: the data directory; with --memory $TMPDIR/omnibus-tls)")
	listFlag(fs, &o.TLSHosts, "tls-hosts", "comma-separated host names and IP addresses the generated certificate names besides localhost, 127.0.0.1 and ::1")
}

// runCert creates the local CA and certificate omnibus serves HTTPS and
// AMQPS with (or finds them), and prints the CA's path, or its PEM with
// --pem: the file clients trust once, e.g.
//
//	SSL_CERT_FILE=$(omnibus cert) go run .
//	NODE_EXTRA_CA_CERTS=$(omnibus cert) node app.mjs
//	omnibus cert --pem | sudo tee /usr/local/share/ca-certificates/omnibus.crt && sudo update-ca-certificates
//
// Give it the flags the broker runs with (--data or --memory, --tls-dir,
// --tls-hosts), so that it finds the same files.
func runCert(args []string) error {
	fs := flag.NewFlagSet("omnibus cert", flag.ContinueOnError)
	var o app.Options
	fs.StringVar(&o.DataDir, "data", app.DefaultDataDir, "data directory of the broker (the CA lives there unless --tls-dir)")
	fs.BoolVar(&o.Memory, "memory", false, "the broker runs with --memory")
	addTLSFlags(fs, &o)
	pemOut := fs.Bool("pem", false, "print the CA certificate itself instead of its path")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	if o.TLSCert != "" {
		return cli.Exit(2, fmt.Errorf("with --tls-cert clients trust whoever issued %s; there is no local CA", o.TLSCert))
	}
	f, err := httpgw.LoadOrCreateCertificates(app.TLSDir(o), o.TLSHosts)
	if err != nil {
		return err
	}
	if f.NewCA {
		fmt.Fprintf(os.Stderr, "omnibus: created a new local CA in %s; trust it in your clients\n", f.CAPath)
	}
	if !*pemOut {
		fmt.Println(f.CAPath)
		return nil
	}
	b, err := os.ReadFile(f.CAPath)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(b)
	return err
}
