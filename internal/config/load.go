package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"
)

// DefaultFile is read when no --config is given and it exists.
const DefaultFile = "nanohost.yaml"

// Load reads the configuration: embedded defaults, then the YAML file (path
// "" means nanohost.yaml if present), then a .env file (in the working
// directory; it never overrides variables already set), then environment
// overrides. ${VAR} in YAML values expands from the environment.
func Load(path string) (*Config, error) {
	c := Defaults()
	explicit := path != ""
	if !explicit {
		path = DefaultFile
	}
	if err := loadDotEnv(".env"); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := decode(data, c); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		c.Source = path
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		// Embedded defaults only.
	default:
		return nil, fmt.Errorf("read config: %w", err)
	}
	if err := applyEnv(c, os.LookupEnv); err != nil {
		return nil, err
	}
	c.secretValues = map[string]Secret{}
	for _, name := range c.AgentSecrets {
		if v, ok := os.LookupEnv(name); ok && v != "" {
			c.secretValues[name] = Secret(v)
		}
	}
	return c, nil
}

// decode reads the YAML into c. A file that is not YAML is an error; a
// misspelt key or a value of the wrong type is a problem Check reports
// (with every other one, each at its line), the setting left at its default.
func decode(data []byte, c *Config) error {
	expanded := os.Expand(string(data), func(name string) string {
		if name == "$" {
			return "$"
		}
		return os.Getenv(name)
	})
	problems, lines, err := decodeChecked([]byte(expanded), c)
	if err != nil {
		return err
	}
	c.readProblems, c.lines = problems, lines
	return nil
}

// envOverride is an environment variable that sets one setting.
type envOverride struct {
	field string // the setting, as problems name it
	set   func(c *Config, v string) error
}

// envOverrides maps environment variables to the settings they override.
var envOverrides = map[string]envOverride{
	"NANOHOST_DATA_DIR":   {"data_dir", func(c *Config, v string) error { c.DataDir = v; return nil }},
	"NANOHOST_DATABASE":   {"database", func(c *Config, v string) error { c.Database = v; return nil }},
	"NANOHOST_STORE_URL":  {"store.url", func(c *Config, v string) error { c.Store.URL = Secret(v); return nil }},
	"NANOHOST_REPLICA_ID": {"replica.id", func(c *Config, v string) error { c.Replica.ID = v; return nil }},
	"NANOHOST_LEASE_TTL": {"replica.lease_ttl", func(c *Config, v string) error {
		return setDuration(&c.Replica.LeaseTTL, "NANOHOST_LEASE_TTL", v)
	}},
	"NANOHOST_WORKSPACES_DIR": {"workspaces.dir", func(c *Config, v string) error { c.Workspaces.Dir = v; return nil }},
	"NANOHOST_LOG_LEVEL":      {"log.level", func(c *Config, v string) error { c.Log.Level = v; return nil }},
	"NANOHOST_LOG_FORMAT":     {"log.format", func(c *Config, v string) error { c.Log.Format = v; return nil }},
	"NANOHOST_HTTP_LISTEN":    {"http.listen", func(c *Config, v string) error { c.HTTP.Listen = v; return nil }},
	"NANOHOST_HTTP_TOKEN":     {"http.token", func(c *Config, v string) error { c.HTTP.Token = Secret(v); return nil }},
	"NANOHOST_PUBLIC_URL":     {"http.public_url", func(c *Config, v string) error { c.HTTP.PublicURL = v; return nil }},
	"NANOHOST_IMAGE":          {"runtime.image", func(c *Config, v string) error { c.Runtime.Image = v; return nil }},
	"NANOHOST_RUNTIME":        {"runtime.kind", func(c *Config, v string) error { c.Runtime.Kind = v; return nil }},
	"NANOHOST_KUBE_NAMESPACE": {"runtime.kubernetes.namespace", func(c *Config, v string) error { c.Runtime.Kubernetes.Namespace = v; return nil }},
	"NANOHOST_AGENT":          {"runtime.agent", func(c *Config, v string) error { c.Runtime.Agent = v; return nil }},
	"NANOHOST_AGENT_SCRIPT":   {"runtime.script", func(c *Config, v string) error { c.Runtime.Script = v; return nil }},
	"NANOHOST_MAX_CONTAINERS": {"runtime.max_containers", func(c *Config, v string) error { return setInt(&c.Runtime.MaxContainers, "NANOHOST_MAX_CONTAINERS", v) }},
	"NANOHOST_IDLE_TIMEOUT": {"runtime.idle_timeout", func(c *Config, v string) error {
		return setDuration(&c.Runtime.IdleTimeout, "NANOHOST_IDLE_TIMEOUT", v)
	}},
	"SLACK_BOT_TOKEN": {"slack.bot_token", func(c *Config, v string) error { c.Slack.BotToken = Secret(v); return nil }},
	"SLACK_APP_TOKEN": {"slack.app_token", func(c *Config, v string) error { c.Slack.AppToken = Secret(v); return nil }},
	"SLACK_API_URL":   {"slack.api_url", func(c *Config, v string) error { c.Slack.APIURL = v; return nil }},
}

// EnvVar is the environment variable that overrides field ("" for none).
func EnvVar(field string) string {
	for name, o := range envOverrides {
		if o.field == field {
			return name
		}
	}
	return ""
}

func applyEnv(c *Config, lookup func(string) (string, bool)) error {
	for name, o := range envOverrides {
		if v, ok := lookup(name); ok && v != "" {
			if err := o.set(c, v); err != nil {
				return err
			}
			if c.fromEnv == nil {
				c.fromEnv = map[string]string{}
			}
			c.fromEnv[o.field] = name
		}
	}
	return nil
}

func setInt(dst *int, name, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%s=%q is not an integer", name, v)
	}
	*dst = n
	return nil
}

func setDuration(dst *time.Duration, name, v string) error {
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%s=%q is not a duration (e.g. 10m)", name, v)
	}
	*dst = d
	return nil
}

// loadDotEnv sets KEY=VALUE lines from path into the environment, without
// overriding variables that are already set. A missing file is fine.
func loadDotEnv(path string) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		text = strings.TrimPrefix(text, "export ")
		key, value, ok := strings.Cut(text, "=")
		if !ok {
			return fmt.Errorf("%s:%d: want KEY=VALUE", path, line)
		}
		key = strings.TrimSpace(key)
		value = strings.TrimSpace(value)
		if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
			value = value[1 : len(value)-1]
		}
		if _, set := os.LookupEnv(key); !set {
			os.Setenv(key, value)
		}
	}
	return sc.Err()
}
