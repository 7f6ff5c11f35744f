package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"
)

// configPoll is how often the daemon looks at its --config file.
const configPoll = 2 * time.Second

// watchConfigFile sends an error to changed once the content of the
// configuration file differs from what it was at start (or the file is
// gone): kube-proxy exits then, so that it restarts with the new one.
func watchConfigFile(ctx context.Context, path string, every time.Duration, changed chan<- error) {
	initial, err := os.ReadFile(path)
	if err != nil {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(now, initial) {
			changed <- fmt.Errorf("the configuration file %s changed; exiting so that the new one is used", path)
			return
		}
	}
}
