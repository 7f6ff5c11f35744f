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

// readAll reads a run's reports, comma-separated paths (the parallel pass
// and the serial one); a test that one report ran and another left out
// counts as ran.
func readAll(paths string) (map[string]result, error) {
	out := map[string]result{}
	for _, p := range strings.Split(paths, ",") {
		if err := read(p, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// read adds the test cases of the report at path to out.
func read(path string, out map[string]result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r report
	if err := xml.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
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
			if old, ok := out[c.Name]; ok && res.state == "skipped" && old.state != "skipped" {
				continue
			}
			out[c.Name] = res
		}
	}
	return nil
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return strings.ReplaceAll(s, "|", "\\|")
}

func main() {
	a := flag.String("a", "", "the JUnit reports of the run with kube-proxy, comma-separated")
	b := flag.String("b", "", "the JUnit reports of the run with nftproxy, comma-separated")
	flag.Parse()
	ra, err := readAll(*a)
	if err == nil {
		var rb map[string]result
		if rb, err = readAll(*b); err == nil {
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
	filtered, worse := 0, 0
	count := map[string]int{}
	for n := range names {
		x, y := ra[n], rb[n]
		switch {
		case x.state != "skipped" || y.state != "skipped":
			ran = append(ran, n)
			count["a "+x.state]++
			count["b "+y.state]++
			if x.state == "passed" && y.state != "passed" {
				worse++
			}
		case x.detail == "" || strings.EqualFold(x.detail, "skipped"):
			filtered++
		default:
			skipped = append(skipped, n)
		}
	}
	sort.Strings(ran)
	sort.Strings(skipped)
	fmt.Printf("%d tests ran. kube-proxy: %d passed, %d failed. nftproxy: %d passed, %d failed. Passed with kube-proxy and not with nftproxy: %d. %d skipped by the suite itself (listed below); %d left out by the focus and skip expressions.\n\n",
		len(ran), count["a passed"], count["a failed"], count["b passed"], count["b failed"], worse, len(skipped), filtered)
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
