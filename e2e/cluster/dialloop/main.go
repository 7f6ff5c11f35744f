package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// targetStats are the counts of one target.
type targetStats struct {
	OK       int            `json:"ok"`
	Failed   int            `json:"failed"`
	Backends map[string]int `json:"backends"`
	Errors   []string       `json:"lastErrors,omitempty"`
}

func main() {
	every := flag.Duration("every", 10*time.Millisecond, "how often to open a new connection to each target")
	timeout := flag.Duration("timeout", 3*time.Second, "the time limit of one request")
	flag.Parse()
	targets := flag.Args()
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "dialloop: give one or more target URLs")
		os.Exit(2)
	}
	client := &http.Client{Timeout: *timeout, Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	stats := map[string]*targetStats{}
	for _, t := range targets {
		stats[t] = &targetStats{Backends: map[string]int{}}
	}
	record := func(t, backend string, err error) {
		mu.Lock()
		defer mu.Unlock()
		s := stats[t]
		if err != nil {
			s.Failed++
			s.Errors = append(s.Errors, time.Now().UTC().Format(time.RFC3339Nano)+" "+err.Error())
			if len(s.Errors) > 5 {
				s.Errors = s.Errors[1:]
			}
			return
		}
		s.OK++
		s.Backends[backend]++
	}
	get := func(t string) {
		resp, err := client.Get(t)
		if err != nil {
			record(t, "", err)
			return
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		record(t, strings.TrimSpace(string(body)), err)
	}
	go func() {
		for range time.Tick(time.Second) {
			mu.Lock()
			line, _ := json.Marshal(map[string]any{"time": time.Now().UTC().Format(time.RFC3339), "targets": stats})
			mu.Unlock()
			fmt.Println(string(line))
		}
	}()
	for range time.Tick(*every) {
		for _, t := range targets {
			go get(t)
		}
	}
}
