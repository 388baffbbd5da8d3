package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
	"github.com/omnibusmq/omnibus/cmd/omnibus/app"
	"github.com/omnibusmq/omnibus/core/sas"
)

func init() { subcommands["token"] = runToken }

// runToken prints a SAS token for curl and other plain HTTP clients:
//
//	curl -H "Authorization: $(omnibus token)" …
func runToken(args []string) error {
	fs := flag.NewFlagSet("omnibus token", flag.ContinueOnError)
	keyName := fs.String("key-name", app.DefaultKeyName, "shared access key name")
	key := fs.String("key", app.DefaultKey, "shared access key")
	resource := fs.String("resource", "http://localhost/", "resource (scope) the token grants: the namespace, or an entity URL")
	ttl := fs.Duration("ttl", time.Hour, "validity")
	if err := cli.ParseWithEnv(fs, args); err != nil {
		return err
	}
	fmt.Println(sas.Sign(*resource, *keyName, *key, time.Now().Add(*ttl)))
	return nil
}
