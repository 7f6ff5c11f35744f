package main

import (
	"fmt"
	"os"

	"github.com/nftproxy/nftproxy/deploy/monitoring"
)

func main() {
	rules, err := monitoring.RuleFile(false)
	if err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(1)
	}
	os.Stdout.Write(rules)
}
