// cdi-validate: loads every CDI spec in the directories given with the CDI project's own
// Go library, as Debian 12 packages it (golang-github-container-orchestrated-devices-
// container-device-interface-dev 0.5.2, the library Debian's podman 4.3 uses), and fails
// on any schema, parse or validation error. Built offline by scripts/k8s-test.sh with
// Debian's Go in GOPATH mode (GO111MODULE=off GOPATH=/usr/share/gocode).
//
//	cdi-validate [-expect N] [-device vendor/class=name]... DIR...
//
// Each file is checked twice: against the CDI JSON schema (the library's builtin one)
// and by the library's cache, which parses it, checks the version, the vendor, class and
// device names, and every container edit (env, device nodes, mounts, hooks). -expect
// says how many devices the directories must hold in all; -device names one that must
// be resolvable. Prints one line per device and "cdi-validate: N specs, M devices, ok".
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/container-orchestrated-devices/container-device-interface/pkg/cdi"
	"github.com/container-orchestrated-devices/container-device-interface/schema"
	specs "github.com/container-orchestrated-devices/container-device-interface/specs-go"
)

type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(v string) error { *n = append(*n, v); return nil }

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "cdi-validate: "+format+"\n", args...)
	os.Exit(1)
}

func main() {
	expect := flag.Int("expect", -1, "devices the directories must hold in all")
	var want names
	flag.Var(&want, "device", "a fully qualified device name that must resolve (repeatable)")
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		fail("no spec directory given")
	}
	files := 0
	for _, dir := range dirs {
		matches, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			fail("%s: %v", dir, err)
		}
		for _, f := range matches {
			files++
			if err := schema.BuiltinSchema().ValidateFile(f); err != nil {
				fail("%s: schema: %v", f, err)
			}
			spec, err := cdi.ReadSpec(f, 0)
			if err != nil {
				fail("%s: %v", f, err)
			}
			if spec.Version != specs.CurrentVersion {
				fail("%s: version %s, not the library's current %s", f, spec.Version, specs.CurrentVersion)
			}
		}
	}
	if files == 0 {
		fail("no spec files in %v", dirs)
	}
	cache, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		fail("cache: %v", err)
	}
	for path, errs := range cache.GetErrors() {
		for _, e := range errs {
			fmt.Fprintf(os.Stderr, "cdi-validate: %s: %v\n", path, e)
		}
		os.Exit(1)
	}
	devices := cache.ListDevices()
	sort.Strings(devices)
	for _, d := range devices {
		dev := cache.GetDevice(d)
		if dev == nil {
			fail("%s listed but not found", d)
		}
		edits := dev.ContainerEdits
		fmt.Printf("%s: %d env, %d device nodes, %d mounts, %d hooks (%s)\n", d,
			len(edits.Env), len(edits.DeviceNodes), len(edits.Mounts), len(edits.Hooks),
			dev.GetSpec().GetPath())
	}
	for _, w := range want {
		if cache.GetDevice(w) == nil {
			fail("%s: not in the specs (have %v)", w, devices)
		}
	}
	if *expect >= 0 && len(devices) != *expect {
		fail("%d devices, expected %d", len(devices), *expect)
	}
	fmt.Printf("cdi-validate: %d specs, %d devices, ok\n", files, len(devices))
}
