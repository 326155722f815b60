// Command modproxy writes Go modules into a directory laid out as a module proxy
// (GOPROXY=file://DIR), at one version: for each module directory given, the
// files the go command fetches, DIR/<module path>/@v/{list, VERSION.info,
// VERSION.mod, VERSION.zip}. make release-check serves holdfast's published
// modules from it; it uses the standard library only.
//
// Usage:
//
//	modproxy -out DIR -version VERSION MODULEDIR...
//
// A module's zip holds its files as the go command would pack them: every
// regular file under the module's directory, minus the directories of nested
// modules (those with a go.mod of their own), version-control directories and
// .cache; each under "<module path>@<version>/".
package main

import (
	"archive/zip"
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
)

func main() {
	out := flag.String("out", "", "the proxy directory to write into")
	version := flag.String("version", "", "the version to publish the modules at, as v1.2.3")
	flag.Parse()
	if *out == "" || !strings.HasPrefix(*version, "v") || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -out DIR -version VERSION MODULEDIR...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		path, err := publish(*out, *version, dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "modproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
		fmt.Printf("modproxy: %s@%s from %s\n", path, *version, dir)
	}
}

// publish writes the module in dir at version into the proxy out and returns
// its module path.
func publish(out, version, dir string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	path := modulePath(gomod)
	if path == "" {
		return "", errors.New("go.mod has no module line")
	}
	at := filepath.Join(out, escape(path), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return "", err
	}
	info, _ := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := writeZip(filepath.Join(at, version+".zip"), dir, path+"@"+version+"/"); err != nil {
		return "", err
	}
	list, err := os.OpenFile(filepath.Join(at, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return "", err
	}
	defer list.Close()
	_, err = fmt.Fprintln(list, version)
	return path, err
}

// modulePath returns the path on go.mod's module line.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(strings.NewReader(string(gomod)))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// escape is the module path as the proxy protocol spells it: each capital
// letter as "!" and its lower case.
func escape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeZip packs the module's files under dir into the zip file name, each
// under prefix.
func writeZip(name, dir, prefix string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return skipDir(dir, p, d.Name())
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return addFile(zw, p, prefix+filepath.ToSlash(rel))
	})
	if err != nil {
		return err
	}
	return zw.Close()
}

// skipDir says whether the walk leaves out directory p (base name base) of the
// module at dir: a nested module, version control, the build cache.
func skipDir(dir, p, base string) error {
	if p == dir {
		return nil
	}
	switch base {
	case ".git", ".hg", ".svn", ".bzr", ".cache", "vendor":
		return filepath.SkipDir
	}
	if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
		return filepath.SkipDir
	}
	return nil
}

// addFile copies the file at p into zw as name.
func addFile(zw *zip.Writer, p, name string) error {
	src, err := os.Open(p)
	if err != nil {
		return err
	}
	defer src.Close()
	w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate})
	if err != nil {
		return err
	}
	_, err = io.Copy(w, src)
	return err
}
