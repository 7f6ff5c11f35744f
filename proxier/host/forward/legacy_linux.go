//go:build linux

package forward

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/nftgen"
	"github.com/nftproxy/nftproxy/proxier/host/xtables"
)

// EnsureLegacy writes kube-proxy's KUBE-FORWARD chain and its jump into
// the legacy (x_tables) filter table of each family whose FORWARD chain
// can drop, in the current network namespace. A family without a legacy
// filter table, or with the rules in place, is only read; a write holds
// the x_tables lock, as iptables-legacy does, and reads the table again
// under it.
// hf is the generator's (nftgen.NewHostForward).
func EnsureLegacy(hf nftgen.HostForward) (Result, error) {
	rules, err := rulesOf(hf)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var errs []error
	for _, fam := range xtables.Families {
		if err := ensureLegacyFamily(fam, rules, &res); err != nil {
			errs = append(errs, fmt.Errorf("legacy %s filter: %w", fam.Name, err))
		}
	}
	return res, errors.Join(errs...)
}

func ensureLegacyFamily(fam xtables.Family, rules forwardRules, res *Result) error {
	fd, err := fam.Socket()
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	plan := func() (xtables.Info, []byte, xtables.Info, error) {
		info, blob, err := fam.Read(fd, "filter")
		if err != nil || blob == nil {
			return info, nil, info, err
		}
		newBlob, ni, err := withForwardRules(blob, info, fam.Layout, rules)
		return info, newBlob, ni, err
	}
	if _, newBlob, _, err := plan(); err != nil || newBlob == nil {
		return err
	}
	release, err := xtables.Lock(xtables.LockPath, xtables.LockWait)
	if err != nil {
		return fmt.Errorf("left unchanged, no x_tables lock: %w", err)
	}
	defer release()
	info, newBlob, ni, err := plan()
	if err != nil || newBlob == nil {
		return err
	}
	if err := fam.Replace(fd, "filter", info, newBlob, ni); err != nil {
		return err
	}
	res.Written = append(res.Written, "legacy "+fam.Name)
	return nil
}
