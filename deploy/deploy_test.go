// Package deploy holds no code: its tests check the deployment files (the
// repository's Dockerfile, deploy/systemd, deploy/kubernetes) as far as a machine
// without a container runtime or a cluster allows.
package deploy

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// buildStatic builds cmd/switchyard as the Dockerfile does.
func buildStatic(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "switchyard")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/switchyard")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	return bin
}

// The binary the image ships needs no libc and no dynamic loader: no PT_INTERP,
// no DT_NEEDED, and it runs with an empty environment (distroless/static and
// scratch have neither a libc nor environment beyond what the image sets).
func TestStaticBinary(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF checks")
	}
	bin := buildStatic(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary has a PT_INTERP program header: it needs a dynamic loader")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v", libs)
	}
	if ldd, err := exec.LookPath("ldd"); err == nil {
		out, _ := exec.Command(ldd, bin).CombinedOutput()
		if !strings.Contains(string(out), "not a dynamic executable") && !strings.Contains(string(out), "statically linked") {
			t.Errorf("ldd %s:\n%s", bin, out)
		}
	}
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"mock-engine", "--help"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{} // empty, not inherited
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%v with an empty environment: %v\n%s", args, err, out)
		} else if !bytes.Contains(out, []byte("USAGE")) && !bytes.Contains(out, []byte("Usage")) {
			t.Errorf("%v printed no usage:\n%s", args, out)
		}
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct{ op, args string }

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ins []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		op, args, _ := strings.Cut(cur.String(), " ")
		ins = append(ins, instruction{strings.ToUpper(op), strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends in a continuation line")
	}
	return ins
}

// With no docker daemon here, the Dockerfile is checked for what makes it work:
// a Go build stage whose Go is go.mod's, a static build of ./cmd/switchyard, a
// final stage from scratch or distroless/static that copies that very binary from
// the build stage and runs it as a non-root user.
func TestDockerfile(t *testing.T) {
	ins := parseDockerfile(t, "../Dockerfile")
	known := []string{"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
	type stage struct {
		name, image string
		ins         []instruction
	}
	var stages []*stage
	for _, in := range ins {
		if !slices.Contains(known, in.op) {
			t.Errorf("unknown instruction %s %s", in.op, in.args)
		}
		if in.op == "FROM" {
			f := strings.Fields(in.args)
			s := &stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.op != "ARG" {
				t.Fatalf("%s before the first FROM", in.op)
			}
			continue
		}
		st := stages[len(stages)-1]
		st.ins = append(st.ins, in)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages; want a build stage and a runtime stage", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVer == nil || build.image != "golang:"+string(goVer[1]) {
		t.Errorf("build stage FROM %s; want golang:%s (go.mod)", build.image, goVer[1])
	}
	var out string
	for _, in := range build.ins {
		if in.op == "RUN" && strings.Contains(in.args, "go build") {
			if !strings.Contains(in.args, "CGO_ENABLED=0") || !strings.Contains(in.args, "./cmd/switchyard") {
				t.Errorf("build is not a static build of ./cmd/switchyard: %s", in.args)
			}
			if m := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(in.args); m != nil {
				out = m[1]
			}
		}
	}
	if out == "" {
		t.Fatal("the build stage runs no `go build -o PATH`")
	}

	if final.image != "scratch" && !strings.HasPrefix(final.image, "gcr.io/distroless/static") {
		t.Errorf("runtime stage FROM %s; want scratch or gcr.io/distroless/static*", final.image)
	}
	var installed, entry, user string
	for _, in := range final.ins {
		switch in.op {
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) == 3 && f[0] == "--from="+build.name && f[1] == out {
				installed = f[2]
			}
		case "ENTRYPOINT":
			entry = in.args
		case "USER":
			user = in.args
		case "RUN":
			t.Errorf("RUN in the runtime stage (no shell in %s): %s", final.image, in.args)
		}
	}
	if build.name == "" || installed == "" {
		t.Fatalf("the runtime stage does not COPY --from=%s %s", build.name, out)
	}
	if entry != `["`+installed+`"]` {
		t.Errorf("ENTRYPOINT %s; want [%q] (exec form: there is no shell)", entry, installed)
	}
	if user == "" || strings.HasPrefix(user, "root") || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q; want a non-root user", user)
	}
	// The files the build stage copies are not all ignored.
	if b, err := os.ReadFile("../.dockerignore"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if l = strings.TrimSpace(l); l == "go.mod" || l == "go.sum" || l == "cmd" || l == "*" {
				t.Errorf(".dockerignore drops %s, which the build needs", l)
			}
		}
	}
}

// manifests decodes every YAML document of the Kubernetes example.
func manifests(t *testing.T) []map[string]any {
	t.Helper()
	paths, _ := filepath.Glob("kubernetes/*.yaml")
	if len(paths) == 0 {
		t.Fatal("no deploy/kubernetes/*.yaml")
	}
	var docs []map[string]any
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(f)
		for {
			var d map[string]any
			err := dec.Decode(&d)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if d == nil {
				continue
			}
			for _, k := range []string{"apiVersion", "kind", "metadata", "spec"} {
				if d[k] == nil {
					t.Errorf("%s: a document without %s", p, k)
				}
			}
			docs = append(docs, d)
		}
		f.Close()
	}
	return docs
}

// get walks m along keys (string for maps, int for lists).
func get(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// The Kubernetes example parses and fits together: the Services select the
// serve pods and name ports the container has; the engines dial the handshake
// Service on the port serve binds, as many ranks as serve expects; the handshake
// Service is published before the pod is ready (it becomes ready only after an
// engine's handshake); serve advertises its pod IP to the engines.
func TestKubernetesManifests(t *testing.T) {
	docs := manifests(t)
	byKind := map[string][]map[string]any{}
	for _, d := range docs {
		byKind[d["kind"].(string)] = append(byKind[d["kind"].(string)], d)
	}
	if len(byKind["Deployment"]) != 1 || len(byKind["StatefulSet"]) != 1 {
		t.Fatalf("want one Deployment (serve) and one StatefulSet (engines): %v", byKind)
	}
	dep, engines := byKind["Deployment"][0], byKind["StatefulSet"][0]
	podLabels := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	sel := get(dep, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range sel {
		if podLabels[k] != v {
			t.Errorf("Deployment selector %s=%v does not match its pods", k, v)
		}
	}
	c := get(dep, "spec", "template", "spec", "containers", 0)
	if a := get(c, "args"); a == nil || get(a, 0) != "serve" {
		t.Errorf("serve container args %v", a)
	} else if !refusesMocks(toList(a)) {
		t.Errorf("serve container args %v lack --mock-engines 0: a lost engine configuration would serve mock engines", a)
	}
	env := map[string]any{}
	for _, e := range get(c, "env").([]any) {
		env[get(e, "name").(string)] = e
	}
	ports := map[string]int{}
	for _, p := range get(c, "ports").([]any) {
		ports[get(p, "name").(string)] = get(p, "containerPort").(int)
	}
	val := func(name string) string { s, _ := get(env[name], "value").(string); return s }
	if val("SWITCHYARD_ENGINE_TRANSPORT") != "tcp" || get(env["SWITCHYARD_ENGINE_BIND_HOST"], "valueFrom", "fieldRef", "fieldPath") != "status.podIP" {
		t.Errorf("serve must hand engines tcp sockets on its pod IP: %v", env)
	}
	hsPort := regexp.MustCompile(`:(\d+)$`).FindStringSubmatch(val("SWITCHYARD_HANDSHAKE_ADDRESS"))
	if hsPort == nil || hsPort[1] != itoa(ports["handshake"]) {
		t.Errorf("SWITCHYARD_HANDSHAKE_ADDRESS %q is not on the handshake containerPort %d", val("SWITCHYARD_HANDSHAKE_ADDRESS"), ports["handshake"])
	}
	if !strings.HasSuffix(val("SWITCHYARD_HTTP_ADDRESS"), ":"+itoa(ports["http"])) {
		t.Errorf("SWITCHYARD_HTTP_ADDRESS %q is not on the http containerPort", val("SWITCHYARD_HTTP_ADDRESS"))
	}

	var handshakeSvc string
	for _, s := range byKind["Service"] {
		name := get(s, "metadata", "name").(string)
		if get(s, "spec", "clusterIP") == "None" {
			continue // the engines' headless Service
		}
		for k, v := range get(s, "spec", "selector").(map[string]any) {
			if podLabels[k] != v {
				t.Errorf("Service %s selects %s=%v, not the serve pods", name, k, v)
			}
		}
		for _, p := range get(s, "spec", "ports").([]any) {
			tp := get(p, "targetPort")
			if n, ok := tp.(string); ok && ports[n] == 0 {
				t.Errorf("Service %s targets port %q, which the container does not name", name, n)
			}
			if tp == "handshake" {
				handshakeSvc = name
				if get(s, "spec", "publishNotReadyAddresses") != true {
					t.Errorf("Service %s (handshake) must publish not-ready addresses: serve is ready only after the handshake", name)
				}
				if get(p, "port") != ports["handshake"] {
					t.Errorf("Service %s publishes the handshake on %v, engines dial %d", name, get(p, "port"), ports["handshake"])
				}
			}
		}
	}
	if handshakeSvc == "" {
		t.Fatal("no Service publishes the handshake port")
	}

	ec := get(engines, "spec", "template", "spec", "containers", 0)
	var cmdline string
	for _, part := range [][]any{toList(get(ec, "command")), toList(get(ec, "args"))} {
		for _, a := range part {
			cmdline += a.(string) + " "
		}
	}
	for _, want := range []string{
		"--headless", "--data-parallel-address " + handshakeSvc, "--data-parallel-rpc-port " + itoa(ports["handshake"]),
		"--data-parallel-size " + val("SWITCHYARD_DATA_PARALLEL_SIZE"), "--data-parallel-size-local 1", "--data-parallel-start-rank",
	} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("the engines' command lacks %q: %s", want, cmdline)
		}
	}
	if itoa(get(engines, "spec", "replicas").(int)) != val("SWITCHYARD_DATA_PARALLEL_SIZE") {
		t.Errorf("%v engine replicas, serve expects %s ranks", get(engines, "spec", "replicas"), val("SWITCHYARD_DATA_PARALLEL_SIZE"))
	}
}

func toList(v any) []any { l, _ := v.([]any); return l }

func toAny(s []string) []any {
	l := make([]any, len(s))
	for i, v := range s {
		l[i] = v
	}
	return l
}

// refusesMocks says whether serve's arguments refuse the built-in mock engines,
// so that a deployment without its engine configuration fails instead of
// answering with made-up words.
func refusesMocks(args []any) bool {
	for i, a := range args {
		if a == "--mock-engines=0" || (a == "--mock-engines" && i+1 < len(args) && args[i+1] == "0") {
			return true
		}
	}
	return false
}

func itoa(n int) string { return strconv.Itoa(n) }

// The systemd unit passes systemd-analyze verify where systemd is installed
// (ExecStart pointed at a freshly built binary), and has the structure a service
// needs everywhere.
func TestSystemdUnit(t *testing.T) {
	b, err := os.ReadFile("systemd/switchyard.service")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]map[string]string{}
	var cur string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			cur = line[1 : len(line)-1]
			sections[cur] = map[string]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || cur == "" {
				t.Fatalf("line %d: %q is neither a section nor a key=value in one", i+1, line)
			}
			sections[cur][k] = v
		}
	}
	for _, s := range []string{"Unit", "Service", "Install"} {
		if sections[s] == nil {
			t.Errorf("no [%s] section", s)
		}
	}
	exec0 := strings.Fields(sections["Service"]["ExecStart"])
	if len(exec0) < 2 || !filepath.IsAbs(exec0[0]) || exec0[1] != "serve" {
		t.Errorf("ExecStart=%s; want an absolute path to switchyard and serve", sections["Service"]["ExecStart"])
	}
	if !refusesMocks(toAny(exec0)) {
		t.Errorf("ExecStart=%s lacks --mock-engines 0: a lost environment file would serve mock engines", sections["Service"]["ExecStart"])
	}
	if sections["Install"]["WantedBy"] == "" {
		t.Error("no WantedBy: systemctl enable would do nothing")
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: structural check only")
		return
	}
	bin := buildStatic(t)
	dir := t.TempDir()
	unit := strings.Replace(string(b), "ExecStart="+exec0[0], "ExecStart="+bin, 1)
	if err := os.WriteFile(filepath.Join(dir, "switchyard.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", filepath.Join(dir, "switchyard.service")).CombinedOutput()
	// verify also reports on units the host lacks (no systemd as PID 1 in a
	// container); only complaints about this unit count.
	var bad []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "switchyard.service") {
			bad = append(bad, l)
		}
	}
	if len(bad) > 0 || (err != nil && len(strings.TrimSpace(string(out))) == 0) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	t.Logf("systemd-analyze verify: %v %s", err, out)
}
