package main

import (
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// testCase is one <testcase> of a JUnit report.
type testCase struct {
	Name    string  `xml:"name,attr"`
	Time    float64 `xml:"time,attr"`
	Status  string  `xml:"status,attr"`
	Failure *struct {
		Message string `xml:"message,attr"`
	} `xml:"failure"`
	Error *struct {
		Message string `xml:"message,attr"`
	} `xml:"error"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
}

type report struct {
	Suites []struct {
		Cases []testCase `xml:"testcase"`
	} `xml:"testsuite"`
}

// result is one test's outcome in one run.
type result struct {
	state, detail string
	seconds       float64
}

func read(path string) (map[string]result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r report
	if err := xml.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]result{}
	for _, s := range r.Suites {
		for _, c := range s.Cases {
			if strings.HasPrefix(c.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(c.Name, "[SynchronizedAfterSuite]") ||
				strings.HasPrefix(c.Name, "[ReportAfterSuite]") || strings.HasPrefix(c.Name, "[ReportBeforeSuite]") {
				continue
			}
			res := result{state: "passed", seconds: c.Time}
			switch {
			case c.Failure != nil:
				res.state, res.detail = "failed", c.Failure.Message
			case c.Error != nil:
				res.state, res.detail = "failed", c.Error.Message
			case c.Skipped != nil:
				res.state, res.detail = "skipped", c.Skipped.Message
			}
			out[c.Name] = res
		}
	}
	return out, nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

func main() {
	a := flag.String("a", "", "the JUnit report of the run with kube-proxy")
	b := flag.String("b", "", "the JUnit report of the run with nftproxy")
	flag.Parse()
	ra, err := read(*a)
	if err == nil {
		var rb map[string]result
		if rb, err = read(*b); err == nil {
			write(ra, rb)
			return
		}
	}
	fmt.Fprintln(os.Stderr, "junitcmp:", err)
	os.Exit(1)
}

func write(ra, rb map[string]result) {
	names := map[string]bool{}
	for n := range ra {
		names[n] = true
	}
	for n := range rb {
		names[n] = true
	}
	var ran, skipped []string
	filtered := 0
	count := map[string]int{}
	for n := range names {
		x, y := ra[n], rb[n]
		switch {
		case x.state != "skipped" || y.state != "skipped":
			ran = append(ran, n)
			count["a "+x.state]++
			count["b "+y.state]++
		case x.detail == "" || strings.EqualFold(x.detail, "skipped"):
			filtered++
		default:
			skipped = append(skipped, n)
		}
	}
	sort.Strings(ran)
	sort.Strings(skipped)
	fmt.Printf("%d tests ran. kube-proxy: %d passed, %d failed. nftproxy: %d passed, %d failed. %d skipped by the suite itself (listed below); %d left out by the focus and skip expressions.\n\n",
		len(ran), count["a passed"], count["a failed"], count["b passed"], count["b failed"], len(skipped), filtered)
	fmt.Println("| test | kube-proxy | nftproxy | seconds (kube-proxy / nftproxy) |")
	fmt.Println("|---|---|---|---:|")
	for _, n := range ran {
		x, y := ra[n], rb[n]
		fmt.Printf("| %s | %s | %s | %.0f / %.0f |\n", oneLine(n), x.state, y.state, x.seconds, y.seconds)
	}
	var failures []string
	for _, n := range ran {
		for _, r := range []struct {
			who string
			res result
		}{{"kube-proxy", ra[n]}, {"nftproxy", rb[n]}} {
			if r.res.state == "failed" {
				failures = append(failures, fmt.Sprintf("- %s, with %s: %s", oneLine(n), r.who, oneLine(r.res.detail)))
			}
		}
	}
	if len(failures) > 0 {
		fmt.Println("\nFailures, with the suite's message:")
		fmt.Println(strings.Join(failures, "\n"))
	}
	if len(skipped) > 0 {
		fmt.Println("\nSkipped by the suite while running, with its reason:")
		fmt.Println()
		fmt.Println("| test | reason |")
		fmt.Println("|---|---|")
		for _, n := range skipped {
			fmt.Printf("| %s | %s |\n", oneLine(n), oneLine(ra[n].detail+" "+rb[n].detail))
		}
	}
}
