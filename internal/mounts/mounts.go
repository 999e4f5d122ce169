// Package mounts decides which host directories agent containers may see:
// the mount allowlist (a file outside every mounted directory, so no agent
// can widen its own access), the patterns never mounted (credentials and
// keys), and the HOST[:NAME][:ro|rw] syntax. Configuration checks it
// without Docker; every runtime mounts only what it allowed.
package mounts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// validName is a mount name agents see under ExtraRoot.
var validName = regexp.MustCompile(`^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,38}[A-Za-z0-9_])?$`)

// Mount is a bind mount from the host.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// DefaultBlockedPatterns are path components that are never mounted into an
// agent container, whatever the allowlist says: credentials and keys.
// A component matches a pattern it equals or starts with (".env.local",
// "credentials.json"); a pattern starting with '.' also matches as a suffix
// ("server.pem"); a pattern with a '/' matches that run of components.
var DefaultBlockedPatterns = []string{
	".ssh", ".gnupg", ".gpg", ".aws", ".azure", ".gcloud", ".config/gcloud", ".kube", ".docker",
	".env", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".password-store", ".secret",
	"credentials", "id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", "private_key", ".pem", ".key",
	"docker.sock",
}

// Allowlist is the allowlist file (JSON). It lives outside every
// mounted directory (by default ~/.config/nanohost/mount-allowlist.json) so
// no agent can widen its own access.
//
//	{"allowed_roots": [{"path": "~/src", "read_write": true}],
//	 "blocked_patterns": ["internal-only"]}
type Allowlist struct {
	AllowedRoots    []AllowedRoot `json:"allowed_roots"`
	BlockedPatterns []string      `json:"blocked_patterns,omitempty"`
}

// AllowedRoot is a directory under which extra mounts may be made.
type AllowedRoot struct {
	Path        string `json:"path"`
	ReadWrite   bool   `json:"read_write,omitempty"`
	Description string `json:"description,omitempty"`
}

// Policy decides which host directories agents may see.
type Policy struct {
	file    string
	roots   []AllowedRoot // resolved absolute paths
	blocked []string
}

// ExtraRoot is where extra mounts appear inside the container.
const ExtraRoot = "/workspace/extra"

// DefaultAllowlistPath is ~/.config/nanohost/mount-allowlist.json.
func DefaultAllowlistPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "nanohost", "mount-allowlist.json")
}

// LoadPolicy reads the allowlist file. A missing file is a policy that
// allows no extra mounts (the workspace is still checked).
func LoadPolicy(file string) (*Policy, error) {
	p := &Policy{file: file, blocked: append([]string(nil), DefaultBlockedPatterns...)}
	if file == "" {
		return p, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	p.file = abs
	data, err := os.ReadFile(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mount allowlist: %w", err)
	}
	var al Allowlist
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&al); err != nil {
		return nil, fmt.Errorf("mount allowlist %s: %w (want {\"allowed_roots\": [{\"path\": \"~/src\", \"read_write\": false}]})", abs, err)
	}
	for _, r := range al.AllowedRoots {
		resolved, err := Resolve(r.Path)
		if err != nil {
			return nil, fmt.Errorf("mount allowlist %s: allowed root %q: %w", abs, r.Path, err)
		}
		r.Path = resolved
		p.roots = append(p.roots, r)
	}
	p.blocked = append(p.blocked, al.BlockedPatterns...)
	return p, nil
}

// Request asks for a host directory inside the container.
type Request struct {
	HostPath string
	// Name is the directory under /workspace/extra (default: the base name).
	Name     string
	ReadOnly bool
}

// ParseFlag reads "HOST[:NAME][:ro|rw]" (read-only unless rw).
func ParseFlag(s string) (Request, error) {
	parts := strings.Split(s, ":")
	req := Request{HostPath: parts[0], ReadOnly: true}
	rest := parts[1:]
	if n := len(rest); n > 0 && (rest[n-1] == "ro" || rest[n-1] == "rw") {
		req.ReadOnly = rest[n-1] == "ro"
		rest = rest[:n-1]
	}
	switch len(rest) {
	case 0:
	case 1:
		req.Name = rest[0]
	default:
		return req, fmt.Errorf("mount %q: want HOST[:NAME][:ro|rw]", s)
	}
	if req.HostPath == "" {
		return req, fmt.Errorf("mount %q: empty host path", s)
	}
	return req, nil
}

// Validate checks an extra mount against the allowlist and the blocked
// patterns and returns the mount to make.
func (p *Policy) Validate(req Request) (Mount, error) {
	host, err := Resolve(req.HostPath)
	if err != nil {
		return Mount{}, fmt.Errorf("mount %s: %w", req.HostPath, err)
	}
	if err := p.checkBlocked(host); err != nil {
		return Mount{}, err
	}
	if err := p.checkPolicyFileOutside(host); err != nil {
		return Mount{}, err
	}
	root, ok := p.rootFor(host)
	if !ok {
		where := p.file
		if where == "" {
			where = DefaultAllowlistPath()
		}
		return Mount{}, fmt.Errorf("mount %s is not under an allowed root: add it to allowed_roots in %s", host, where)
	}
	if !req.ReadOnly && !root.ReadWrite {
		return Mount{}, fmt.Errorf("mount %s: %s is allowed read-only; mount it with :ro or set read_write in the allowlist", host, root.Path)
	}
	name := req.Name
	if name == "" {
		name = filepath.Base(host)
	}
	if !validName.MatchString(name) || strings.HasPrefix(name, ".") {
		return Mount{}, fmt.Errorf("mount name %q: use letters, digits, '-', '_' and '.' only", name)
	}
	return Mount{Source: host, Target: path.Join(ExtraRoot, name), ReadOnly: req.ReadOnly}, nil
}

// CheckWorkspace refuses a workspace that would expose too much: the root
// directory, a home directory, anything matching a blocked pattern, or a
// directory holding the allowlist file or the host's state.
func (p *Policy) CheckWorkspace(dir string, stateDirs ...string) error {
	abs, err := Resolve(dir)
	if err != nil {
		return fmt.Errorf("workspace %s: %w", dir, err)
	}
	if abs == "/" {
		return errors.New("workspace is /: choose a project directory")
	}
	if home, err := os.UserHomeDir(); err == nil {
		if h, err := filepath.EvalSymlinks(home); err == nil && h == abs {
			return fmt.Errorf("workspace is your home directory (%s): choose a project directory", abs)
		}
	}
	if err := p.checkBlocked(abs); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if err := p.checkPolicyFileOutside(abs); err != nil {
		return err
	}
	for _, s := range stateDirs {
		if s == "" {
			continue
		}
		sabs, err := filepath.Abs(s)
		if err == nil {
			if r, err := filepath.EvalSymlinks(sabs); err == nil {
				sabs = r
			}
		}
		if Within(sabs, abs) {
			return fmt.Errorf("the host's state directory %s is inside the workspace %s, where agents could tamper with it: move it out (--state-dir)", sabs, abs)
		}
	}
	return nil
}

func (p *Policy) checkBlocked(abs string) error {
	lower := strings.ToLower(abs)
	for _, pat := range p.blocked {
		pat = strings.ToLower(strings.Trim(pat, "/"))
		if pat == "" {
			continue
		}
		if blockedBy(lower, pat) {
			return fmt.Errorf("%s matches the blocked pattern %q (credentials are never mounted)", abs, pat)
		}
	}
	return nil
}

func blockedBy(lowerPath, pat string) bool {
	if strings.Contains(pat, "/") {
		return strings.Contains(lowerPath+"/", "/"+pat+"/")
	}
	for _, comp := range strings.Split(lowerPath, "/") {
		if comp == "" {
			continue
		}
		if strings.HasPrefix(comp, pat) || (strings.HasPrefix(pat, ".") && strings.HasSuffix(comp, pat)) {
			return true
		}
	}
	return false
}

// checkPolicyFileOutside refuses a mount that contains the allowlist file.
func (p *Policy) checkPolicyFileOutside(abs string) error {
	file := p.file
	if file == "" {
		file = DefaultAllowlistPath()
	}
	if file != "" && Within(file, abs) {
		return fmt.Errorf("%s contains the mount allowlist %s: an agent could rewrite its own permissions", abs, file)
	}
	return nil
}

func (p *Policy) rootFor(abs string) (AllowedRoot, bool) {
	for _, r := range p.roots {
		if Within(abs, r.Path) {
			return r, true
		}
	}
	return AllowedRoot{}, false
}

// Resolve expands ~, makes the path absolute and resolves symlinks, so
// a link cannot smuggle a blocked directory past the checks.
func Resolve(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	return resolved, nil
}

// Within reports whether p is dir or inside it.
func Within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
