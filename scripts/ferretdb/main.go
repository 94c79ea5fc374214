// Command ferretdb runs FerretDB with its SQLite backend: a MongoDB-protocol server the tests and
// `npm run ferretdb` start on loopback. It embeds FerretDB's own package for embedding
// (github.com/FerretDB/FerretDB/ferretdb) rather than building FerretDB's command: the module as the
// Go proxy serves it lacks the generated build/version/version.txt, without which that command
// panics at start.
//
// It prints one line, "ferretdb listening on mongodb://HOST:PORT/", once it accepts connections,
// and stops on SIGINT or SIGTERM, or (-stop-on-eof) when its standard input closes, so a parent that
// dies without stopping it does not leave it running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "ferretdb: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on (port 0: a free one, printed)")
	stateDir := flag.String("state-dir", "", "directory of the SQLite databases (one file per database); created when missing")
	logLevel := flag.String("log-level", "warn", "debug, info, warn or error")
	stopOnEOF := flag.Bool("stop-on-eof", false, "stop when standard input reaches its end")
	flag.Parse()

	if *stateDir == "" {
		return errors.New("-state-dir is required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("-log-level: %w", err)
	}
	dir, err := filepath.Abs(*stateDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}

	// The embeddable package never reports telemetry (it disables and locks it itself), and a
	// loopback address keeps the server off the network.
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listen},
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: dir + "/"}).String(),
	})
	if err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stopOnEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			stop()
		}()
	}

	// Listening already: New opened the socket, so the address is known and connections queue.
	fmt.Printf("ferretdb listening on %s\n", f.MongoDBURI())
	return f.Run(ctx)
}
