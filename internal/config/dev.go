package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"time"

	"fencegate/api"
)

// Dev is everything `fencegate dev` needs.
type Dev struct {
	// Listen is the host:port to serve the gateway on.
	Listen string
	// Data is the directory of etcd's data and the S3 objects.
	Data string
	// S3Port is the S3 server's port on 127.0.0.1 (0: a free one).
	S3Port int
	// Stores are the stores to run (--stores): api.StoreS3 always, and
	// api.StoreGCS when asked for. With GCS, the bucket DevGCSBucket is
	// in it (Shared.Buckets).
	Stores []string
	Shared
	// Ignored are the config file's settings that dev does not use (its
	// etcd and S3 sections): dev runs its own.
	Ignored []string
	// S3APINote is what dev says about its S3 API beyond its address and
	// key ("" for nothing), such as why it is off.
	S3APINote string
}

const devDescription = `
Run fencegate locally with nothing else installed: an embedded etcd, the
versitygw S3 server (a child process; build it with make tools) and a
gateway in front of them. It creates the bucket "dev" and prints a curl
session to try. Data stays in --data: run it again to pick up where you
left off. Ctrl-C stops everything.

The versitygw binary is taken from $FENCEGATE_VERSITYGW, else from next to
the fencegate binary, else from bin/ of the repository it is run in.

With --stores s3,gcs it also runs fake-gcs-server (a child process; make
tools builds it; $FENCEGATE_FAKE_GCS overrides where it is taken from),
objects in --data/gcs, and maps the bucket dev-gcs to it: its resources
are gcs/dev-gcs/KEY.

It serves the S3 API too, on --s3-listen (default ` + DevS3Listen + `; empty: off), and
prints an aws-cli example: without an auth section its access key is
fencegate-dev-s3, with one the S3 keys of the file's identities.

--config FILE reads the YAML config file that fencegate serve reads (to try
partner routes and auth locally); its etcd, s3 and buckets sections are
not used.`

// DevGCSBucket is the bucket that dev puts in its GCS emulator.
const DevGCSBucket = "dev-gcs"

// ParseDev reads dev's flags, environment and config file, and checks
// them, as ParseServe does.
func ParseDev(args []string, lookupEnv LookupEnv, stdout io.Writer, extra error) (Dev, error) {
	cmd := newCommand("dev", "fencegate dev [flags]", devDescription)
	fs := cmd.fs
	var cfg Dev
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "`host:port` to serve the gateway on")
	fs.StringVar(&cfg.Data, "data", ".fencegate", "`directory` of etcd's data (etcd/) and the S3 objects (s3/)")
	fs.IntVar(&cfg.S3Port, "s3-port", 0, "`port` of the S3 server on 127.0.0.1 (0: a free one)")
	addS3APIFlags(fs, &cfg.S3API, DevS3Listen)
	anywhere := fs.Bool(insecureListenAnywhere, false, "let --listen and --s3-listen be addresses other machines reach: dev then serves\n"+
		"them without auth (unless the --config file has an auth section) and with its published S3 key")
	stores := fs.String("stores", api.StoreS3, "comma-separated `stores` to run: s3, or s3,gcs to run fake-gcs-server too\n(a child process) with the bucket "+DevGCSBucket+" in it")
	shared := addSharedFlags(cmd, &cfg.Shared)
	if err := cmd.parse(args, lookupEnv, stdout); err != nil {
		return Dev{}, err
	}
	cfg.Ignored = cmd.ignored
	if cmd.file != nil && cmd.file.buckets != nil {
		cfg.Ignored = append(cfg.Ignored, "buckets")
	}
	var errs []error
	cfg.Stores, shared.buckets, errs = devStores(*stores)
	errs = append(errs, validateListen("listen", cfg.Listen))
	if cfg.Data == "" {
		errs = append(errs, errors.New("--data must not be empty"))
	}
	if cfg.S3Port < 0 || cfg.S3Port > 65535 {
		errs = append(errs, fmt.Errorf("--s3-port %d: must be from 0 to 65535", cfg.S3Port))
	}
	errs = append(errs, shared.finish(cmd, &cfg.Shared))
	note, err := finishS3API(&cfg.S3API, cfg.Listen, cfg.Auth, true)
	cfg.S3APINote = note
	errs = append(errs, err, extra)
	if !*anywhere {
		errs = append(errs, loopbackOnly("listen", cfg.Listen))
		if cfg.S3API.Listen != "" {
			errs = append(errs, loopbackOnly("s3-listen", cfg.S3API.Listen))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Dev{}, &UsageError{fmt.Errorf("dev: %w", cmd.locate(err))}
	}
	return cfg, nil
}

// devStores parses --stores: s3, and gcs if listed. It returns the
// stores, the buckets they map (DevGCSBucket to GCS, or none) and what is
// wrong with the list.
func devStores(list string) ([]string, []Bucket, []error) {
	stores := []string{api.StoreS3}
	buckets := []Bucket{} // not nil: dev's mapping replaces the file's
	var errs []error
	for _, s := range splitList(list) {
		switch s {
		case api.StoreS3:
		case api.StoreGCS:
			if !slices.Contains(stores, s) {
				stores = append(stores, s)
				buckets = append(buckets, Bucket{Name: DevGCSBucket, Store: api.StoreGCS})
			}
		default:
			errs = append(errs, fmt.Errorf("--stores %q: unknown store %q (want s3 or s3,gcs)", list, s))
		}
	}
	if !slices.Contains(splitList(list), api.StoreS3) {
		errs = append(errs, fmt.Errorf("--stores %q: s3 is always run (it holds the bucket dev and partner answers); want s3 or s3,gcs", list))
	}
	return stores, buckets, errs
}

// insecureListenAnywhere is the flag that lets dev listen on addresses
// other than loopback ones.
const insecureListenAnywhere = "insecure-listen-anywhere"

// loopbackOnly refuses a dev listener's address (the flag flagName's)
// that other machines may reach: dev serves without auth unless the
// config file has an auth section, its S3 API takes the published key
// DevS3Key, and its etcd and S3 server hold throwaway data. Allowed are
// loopback IPs (127.0.0.0/8, ::1) and names that resolve to loopback
// addresses only (localhost); refused are an empty host (every
// interface), 0.0.0.0 and ::, any other IP, and names that resolve
// elsewhere, in part, or not at all. A valid host:port is assumed
// (validateListen said otherwise already).
func loopbackOnly(flagName, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	why := ""
	switch ip, err := netip.ParseAddr(host); {
	case host == "":
		why = "an empty host listens on every interface"
	case err == nil && !ip.Unmap().IsLoopback():
		why = ip.String() + " is not a loopback IP"
	case err != nil:
		why = nonLoopbackName(host)
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("--%s %s: not a loopback address (%s): fencegate dev serves without auth unless the --config file has an auth section, "+
		"and its S3 API takes the published key %s; listen on 127.0.0.1, [::1] or localhost, or pass --%s to serve other machines all the same",
		flagName, addr, why, DevS3Key.AccessKeyID, insecureListenAnywhere)
}

// nonLoopbackName resolves host as the listener will, and says why it
// is not loopback-only ("" when every address it resolves to is).
func nonLoopbackName(host string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return fmt.Sprintf("%s does not resolve here", host)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return fmt.Sprintf("%s resolves to %s", host, ip)
		}
	}
	return ""
}
