// Command nfpm packages pacer: from a staging directory that `make install
// DESTDIR=STAGE PREFIX=/usr` filled, it writes a .deb, an .rpm or a
// .tar.gz of exactly those files, with the nfpm library
// (github.com/goreleaser/nfpm/v2). It is a module of its own so that
// pacer's module, and pacerd, neither require nor link nfpm; the Makefile
// runs it (make deb, make rpm, make release).
//
//	go run . -format deb -arch amd64 -version v1.2.3 -stage STAGE -scripts ../../packaging/scripts -out DIST
//
// Files under /etc become conffiles (config|noreplace): an upgrade keeps a
// changed file, remove keeps it, purge removes it. The .deb also gets
// -copyright as /usr/share/doc/pacer/copyright (Debian's place for it);
// in the .rpm the doc directory's LICENSE and NOTICE are %license files. The packages declare no
// Depends (pacerd and pacerctl are static and talk netlink themselves, they
// run no nft or ip) and Recommend nftables and iproute2, the tools to look
// at what gateway mode and pacerd shell set up and to create named
// namespaces. File times are -mtime (make passes the commit's time), so
// the same commit gives the same archive.
package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("nfpm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "deb", "what to write: deb, rpm or tar (a .tar.gz)")
	arch := fs.String("arch", "amd64", "GOARCH of the binaries in the stage: amd64 or arm64")
	version := fs.String("version", "", "pacer's version as the Makefile gives it (v1.2.3, v1.2.3-4-gabc, v0.0.0-DATE-HASH, +dirty)")
	stage := fs.String("stage", "", "staging `directory`: the files as they are to be installed under /")
	scripts := fs.String("scripts", "", "`directory` of the maintainer scripts (postinst, prerm, postrm; rpm-post, rpm-preun, rpm-postun)")
	out := fs.String("out", ".", "output `directory`")
	mtime := fs.Int64("mtime", 0, "the files' modification time, Unix seconds (0: $SOURCE_DATE_EPOCH, else now)")
	copyright := fs.String("copyright", "", "`file` the .deb installs as "+debCopyright+" (Debian's copyright file)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *stage == "" || *version == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "nfpm: -stage and -version are required, and no arguments")
		return exitUsage
	}
	p := pkg{format: *format, arch: *arch, version: *version, stage: *stage, scripts: *scripts, copyright: *copyright, mtime: modTime(*mtime)}
	name, err := p.write(*out)
	if err != nil {
		fmt.Fprintf(stderr, "nfpm: %v\n", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, name)
	return exitOK
}

// modTime returns the files' time: sec, else $SOURCE_DATE_EPOCH, else
// now.
func modTime(sec int64) time.Time {
	if sec == 0 {
		if _, err := fmt.Sscan(os.Getenv("SOURCE_DATE_EPOCH"), &sec); err != nil {
			return time.Now().UTC().Truncate(time.Second)
		}
	}
	return time.Unix(sec, 0).UTC()
}

// pkg is one package to write.
type pkg struct {
	format, arch, version string
	stage, scripts        string
	copyright             string // the .deb's copyright file, if any
	mtime                 time.Time
}

// Where pacer's documentation is installed, and the .deb's copyright
// file in it.
const (
	docDir       = "/usr/share/doc/pacer"
	debCopyright = docDir + "/copyright"
)

// license is the packages' licence (the .rpm's License tag), as SPDX: pacer's
// own (Apache-2.0), with what the binaries link and embed (BSD-2-Clause,
// BSD-3-Clause, MIT) and the Mahimahi trace in /usr/share/pacer/traces
// (GPL-3.0-or-later); NOTICE lists each.
const license = "Apache-2.0 AND BSD-2-Clause AND BSD-3-Clause AND MIT AND GPL-3.0-or-later"

// write writes the package into dir and returns its path.
func (p pkg) write(dir string) (string, error) {
	v, err := packageVersion(p.version)
	if err != nil {
		return "", err
	}
	if p.format == "tar" {
		return p.writeTar(dir)
	}
	info, err := p.info(v)
	if err != nil {
		return "", err
	}
	packager, err := nfpm.Get(p.format)
	if err != nil {
		return "", fmt.Errorf("format %q: %w", p.format, err)
	}
	info = nfpm.WithDefaults(info)
	if err := info.Validate(); err != nil {
		return "", fmt.Errorf("package description: %w", err)
	}
	name := filepath.Join(dir, packager.ConventionalFileName(info))
	f, err := os.Create(name)
	if err != nil {
		return "", fmt.Errorf("create package: %w", err)
	}
	if err := packager.Package(info, f); err != nil {
		f.Close()
		os.Remove(name)
		return "", fmt.Errorf("%s: %w", p.format, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return name, nil
}

// info describes the package of version v (in the form packageVersion
// gives).
func (p pkg) info(v string) (*nfpm.Info, error) {
	contents, err := p.contents()
	if err != nil {
		return nil, err
	}
	info := &nfpm.Info{
		Name:          "pacer",
		Arch:          p.arch,
		Platform:      "linux",
		Version:       v,
		VersionSchema: "none", // packageVersion has made it a deb and rpm version already
		Release:       "1",
		Section:       "net",
		Priority:      "optional",
		Maintainer:    "pacer developers <pacer-dev@users.noreply.github.com>",
		Homepage:      "https://github.com/pacer-dev/pacer",
		License:       license,
		Description: "userspace traffic shaper for Linux\n" +
			"pacerd shapes the traffic between two TUN devices by classes (rates, bursts,\n" +
			"fair queueing, per-key limits, link emulation), between namespaces, in front\n" +
			"of one program (pacerd shell) or on a router (gateway mode); pacerctl steers\n" +
			"it while traffic flows. The unit is installed but neither enabled nor started.",
		MTime: p.mtime,
		Overridables: nfpm.Overridables{
			Recommends: []string{"nftables", "iproute2"},
			Contents:   contents,
			Umask:      0o022,
		},
	}
	if p.scripts != "" {
		s := func(name string) string { return filepath.Join(p.scripts, name) }
		switch p.format {
		case "deb":
			info.Scripts = nfpm.Scripts{PostInstall: s("postinst"), PreRemove: s("prerm"), PostRemove: s("postrm")}
		case "rpm":
			info.Scripts = nfpm.Scripts{PostInstall: s("rpm-post"), PreRemove: s("rpm-preun"), PostRemove: s("rpm-postun")}
		}
	}
	return info, nil
}

// contents lists the stage's files (and pacer's own directories, so that
// purge removes them), sorted by path; files under /etc are conffiles.
func (p pkg) contents() (files.Contents, error) {
	var cs files.Contents
	err := filepath.WalkDir(p.stage, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p.stage, name)
		if err != nil {
			return err
		}
		dst := "/" + filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if ownDir(dst) {
				cs = append(cs, &files.Content{Destination: dst, Type: files.TypeDir,
					FileInfo: &files.ContentFileInfo{Mode: 0o755, MTime: p.mtime}})
			}
		case d.Type().IsRegular():
			c := &files.Content{Source: name, Destination: dst,
				FileInfo: &files.ContentFileInfo{Mode: fi.Mode().Perm(), MTime: p.mtime}}
			switch {
			case strings.HasPrefix(dst, "/etc/"):
				c.Type = files.TypeConfigNoReplace
			case p.format == "rpm" && (dst == docDir+"/LICENSE" || dst == docDir+"/NOTICE"):
				c.Type = files.TypeRPMLicense
			}
			cs = append(cs, c)
		default:
			return fmt.Errorf("%s: neither a file nor a directory", name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("stage: %w", err)
	}
	if !slices.ContainsFunc(cs, func(c *files.Content) bool { return c.Type == files.TypeConfigNoReplace }) {
		return nil, errors.New("stage: no config file under /etc")
	}
	if p.format == "deb" && p.copyright != "" {
		if slices.ContainsFunc(cs, func(c *files.Content) bool { return c.Destination == debCopyright }) {
			return nil, fmt.Errorf("stage: has %s already", debCopyright)
		}
		if _, err := os.Stat(p.copyright); err != nil {
			return nil, fmt.Errorf("copyright: %w", err)
		}
		cs = append(cs, &files.Content{Source: p.copyright, Destination: debCopyright,
			FileInfo: &files.ContentFileInfo{Mode: 0o644, MTime: p.mtime}})
		slices.SortFunc(cs, func(a, b *files.Content) int { return strings.Compare(a.Destination, b.Destination) })
	}
	return cs, nil
}

// ownDir reports whether dst is a directory of pacer's own (a "pacer"
// directory or one below it), which the package owns; the others
// (/usr/bin ...) are only parents.
func ownDir(dst string) bool {
	return slices.Contains(strings.Split(dst, "/"), "pacer")
}

// Versions as the Makefile's VERSION gives them.
var (
	tagged    = regexp.MustCompile(`^v(\d+\.\d+\.\d+)(?:-([0-9A-Za-z.]+))?$`)                  // v1.2.3, v1.2.3-rc1
	described = regexp.MustCompile(`^v(\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)-(\d+)-g([0-9a-f]+)$`) // v1.2.3-4-gabc
	pseudo    = regexp.MustCompile(`^v(\d+\.\d+\.\d+)-(\d{14})-([0-9a-f]{12})$`)               // v0.0.0-20260101120000-abcdef012345
)

// packageVersion turns a version as the Makefile gives it into one that
// dpkg and rpm order correctly (both know "~" as "before" and "+" as
// "after"):
//
//	v1.2.3                         1.2.3
//	v1.2.3-rc1                     1.2.3~rc1
//	v1.2.3-4-gabcdef012345         1.2.3+git4.gabcdef012345
//	v0.0.0-20260101120000-abcdef0  0.0.0~git20260101120000.abcdef0
//	any of these +dirty            ...+dirty
func packageVersion(v string) (string, error) {
	base, dirty := strings.CutSuffix(v, "+dirty")
	suffix := ""
	if dirty {
		suffix = "+dirty"
	}
	if m := pseudo.FindStringSubmatch(base); m != nil {
		return m[1] + "~git" + m[2] + "." + m[3] + suffix, nil
	}
	if m := described.FindStringSubmatch(base); m != nil {
		t, err := packageVersion("v" + m[1])
		if err != nil {
			return "", err
		}
		return t + "+git" + m[2] + ".g" + m[3] + suffix, nil
	}
	if m := tagged.FindStringSubmatch(base); m != nil {
		if m[2] != "" {
			return m[1] + "~" + m[2] + suffix, nil
		}
		return m[1] + suffix, nil
	}
	return "", fmt.Errorf("version %q: want v1.2.3, v1.2.3-rc1, v1.2.3-4-gHASH or a Go pseudo-version, optionally +dirty", v)
}

// writeTar writes pacer-VERSION-linux-ARCH.tar.gz: the stage's files under
// pacer-VERSION-linux-ARCH/, sorted, owned by root, at p.mtime, so that
// the same stage gives the same bytes.
func (p pkg) writeTar(dir string) (string, error) {
	top := "pacer-" + strings.TrimPrefix(p.version, "v") + "-linux-" + p.arch
	name := filepath.Join(dir, top+".tar.gz")
	f, err := os.Create(name)
	if err != nil {
		return "", fmt.Errorf("create archive: %w", err)
	}
	err = p.tarInto(f, top)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write %s: %w", name, cerr)
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

func (p pkg) tarInto(w io.Writer, top string) error {
	zw := gzip.NewWriter(w) // no name, no time in the header
	tw := tar.NewWriter(zw)
	hdr := func(name string, mode int64, typ byte, size int64) *tar.Header {
		return &tar.Header{Name: name, Mode: mode, Typeflag: typ, Size: size, ModTime: p.mtime,
			Uname: "root", Gname: "root", Format: tar.FormatPAX}
	}
	if err := tw.WriteHeader(hdr(top+"/", 0o755, tar.TypeDir, 0)); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	err := filepath.WalkDir(p.stage, func(name string, d fs.DirEntry, err error) error { // WalkDir walks in lexical order
		if err != nil || name == p.stage {
			return err
		}
		rel, err := filepath.Rel(p.stage, name)
		if err != nil {
			return err
		}
		dst := path.Join(top, filepath.ToSlash(rel))
		if d.IsDir() {
			return tw.WriteHeader(hdr(dst+"/", 0o755, tar.TypeDir, 0))
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: neither a file nor a directory", name)
		}
		if err := tw.WriteHeader(hdr(dst, int64(fi.Mode().Perm()), tar.TypeReg, fi.Size())); err != nil {
			return err
		}
		src, err := os.Open(name)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}
