package main

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/omnibusmq/omnibus/cmd/internal/cli"
)

// What Microsoft's Service Bus emulator image promises the tools that
// start it (Aspire, Testcontainers, its docker-compose file), so that an
// integration works when only the image name changes.
const (
	// emulatorConfigPath is where the emulator reads Config.json and where
	// Aspire and Testcontainers mount it; omnibus reads it there when no
	// --config is given.
	emulatorConfigPath = "/ServiceBus_Emulator/ConfigFiles/Config.json"
	// emulatorReadyLine is logged once the broker serves; Testcontainers
	// for .NET waits for it.
	emulatorReadyLine = "Emulator Service is Successfully Up!"
)

// emulatorVariables are the environment the emulator needs for its SQL
// Server; omnibus needs none of it and says so once.
var emulatorVariables = []string{"ACCEPT_EULA", "SQL_SERVER", "MSSQL_SA_PASSWORD", "SQL_WAIT_INTERVAL"}

// emulatorConfig returns path when a file is there (the emulator's mount
// point) and "" when nothing is; any other error (a directory, no
// permission) is returned, since a mounted but unreadable file is a
// mistake to report, not to skip.
func emulatorConfig(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case st.IsDir():
		return "", &fs.PathError{Op: "read", Path: path, Err: errors.New("is a directory, not a Config.json")}
	}
	return path, nil
}

// logEmulatorEnvironment says, in one line, that the emulator's SQL Server
// variables are accepted and ignored, and warns about OMNIBUS_ variables
// that name no flag (a misspelling would otherwise pass unnoticed). It
// never fails the start.
func logEmulatorEnvironment(log *zap.Logger, environ []string, flags *flag.FlagSet) {
	known := map[string]bool{}
	flags.VisitAll(func(f *flag.Flag) { known[cli.EnvName(f.Name)] = true })
	var ignored, unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case slices.Contains(emulatorVariables, name):
			ignored = append(ignored, name)
		case strings.HasPrefix(name, "OMNIBUS_") && !known[name]:
			unknown = append(unknown, name)
		}
	}
	sort.Strings(ignored)
	sort.Strings(unknown)
	if len(ignored) > 0 {
		log.Info("the emulator's variables are accepted and ignored: omnibus needs no SQL Server and no EULA",
			zap.Strings("variables", ignored))
	}
	if len(unknown) > 0 {
		log.Warn("environment variables that name no flag are ignored (see omnibus -h)", zap.Strings("variables", unknown))
	}
}
