package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"

	"github.com/pacer-dev/pacer/config"
	"github.com/pacer-dev/pacer/shaper"
	"github.com/pacer-dev/pacer/shaper/global"
)

// newGlobalClient returns the Redis client of the config's global classes
// (nil without a redis section). It reads the password file now, before
// pacerd drops its privileges. The host name it reports is the machine's
// name and the link's inner device, unique in a fleet and the same after
// a restart, so that a restarted pacerd takes back its reservation.
func newGlobalClient(cfg *config.Config) (*global.Client, error) {
	r := cfg.Redis
	if r == nil {
		return nil, nil
	}
	o := shaper.RedisOptions(r)
	if r.PasswordFile != "" {
		pw, err := readPassword(r.PasswordFile)
		if err != nil {
			return nil, err
		}
		o.Password = pw
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("redis: host name: %w", err)
	}
	return global.NewClient(o, host+"/"+cfg.Link.Inner.Name)
}

// readPassword returns the first line of a password file.
func readPassword(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("redis.password_file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Scan()
	pw := string(bytes.TrimSpace(sc.Bytes()))
	if pw == "" {
		return "", fmt.Errorf("redis.password_file: %s holds no password", path)
	}
	return pw, nil
}
