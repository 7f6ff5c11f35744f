//go:build linux

package cleanup

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nftproxy/nftproxy/proxier/host/xtables"
)

// CleanupLegacy removes kube-proxy's rules from the legacy (x_tables) nat
// and filter tables of both families in the current network namespace.
//
// It holds the x_tables lock (xtables.LockPath) meanwhile, as
// iptables-legacy does, and changes nothing when it cannot take it (the
// lock file not mounted into the container, or another program holding it
// for longer than iptables' own wait): replacing a table without the lock
// could undo another program's concurrent change.
func CleanupLegacy() (Result, error) {
	return cleanupLegacy(xtables.LockPath, xtables.LockWait)
}

func cleanupLegacy(lock string, wait time.Duration) (Result, error) {
	var total Result
	var errs []error
	release, err := xtables.Lock(lock, wait)
	if err != nil {
		return total, fmt.Errorf("legacy iptables left unchanged, no x_tables lock: %w", err)
	}
	defer release()
	for _, fam := range xtables.Families {
		fd, err := fam.Socket()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, table := range []string{"nat", "filter", "mangle"} {
			r, err := cleanupTable(fd, fam, table)
			if err != nil {
				errs = append(errs, fmt.Errorf("legacy %s table: %w", table, err))
			}
			total.Add(r)
		}
		unix.Close(fd)
	}
	return total, errors.Join(errs...)
}

func cleanupTable(fd int, fam xtables.Family, table string) (Result, error) {
	info, blob, err := fam.Read(fd, table)
	if err != nil || blob == nil {
		return Result{}, err
	}
	newBlob, ni, res, err := removeKubeProxy(table, blob, info, fam.Layout)
	if err != nil || newBlob == nil {
		return res, err
	}
	return res, fam.Replace(fd, table, info, newBlob, ni)
}
